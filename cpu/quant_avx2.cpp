// AVX2 kernels for CPUs without AVX-512 VNNI: float weights, the 32-value block types and the
// K-quants (the low-bit types in quant_low_bit_avx2.cpp), on activations widened to int16 as
// dot_avx2.h lays them out; dequantization and activation quantization. Built with -mavx2 -mfma
// -mf16c -mno-avx512f for this file only, so it never uses an instruction the avx2 path may not
// have. Types not listed in avx2_kernels() use the scalar reference.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "cpu/dot_avx2.h"

namespace strata::cpu {
namespace {

// ---------------------------------------------------------------- float weights
template <bool kHalf>
struct DotFloat {  // F32 or F16 weights against F32 activations; a scalar tail
    static constexpr bool kWide = false;
    template <int NT>
    static void run(const void* wv, const Tokens& x, int64_t n, float* out) {
        const uint8_t* a = x.a;
        const size_t stride = x.stride;
        __m256 acc[NT];
        for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
        auto wload = [&](int64_t i) {
            if constexpr (kHalf) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(static_cast<const f16_bits*>(wv) + i)));
            else return _mm256_loadu_ps(static_cast<const float*>(wv) + i);
        };
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) {
            if (i % 16 == 0) prefetch_ahead<kPrefetchBytes>(static_cast<const uint8_t*>(wv) + i * (kHalf ? 2 : 4));
            const __m256 wx = wload(i);
            for (int t = 0; t < NT; ++t)
                acc[t] = _mm256_fmadd_ps(wx, _mm256_loadu_ps(reinterpret_cast<const float*>(a + t * stride) + i), acc[t]);
        }
        for (int t = 0; t < NT; ++t) {
            float s = hsum8(acc[t]);
            const auto* y = reinterpret_cast<const float*>(a + t * stride);
            for (int64_t j = i; j < n; ++j) {
                if constexpr (kHalf) s += h2f(static_cast<const f16_bits*>(wv)[j]) * y[j];
                else s += static_cast<const float*>(wv)[j] * y[j];
            }
            out[t] = s;
        }
    }
};

// BF16 weights widened to fp32 (a shift) against fp32 activations: products exact.
inline __m256 bf16x8(const uint16_t* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)p)), 16));
}
struct DotBf16 {
    static constexpr bool kWide = false;
    template <int NT>
    static void run(const void* wv, const Tokens& x, int64_t n, float* out) {
        const uint8_t* a = x.a;
        const size_t stride = x.stride;
        const auto* w = static_cast<const uint16_t*>(wv);
        __m256 acc[NT];
        for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) {
            if (i % 32 == 0) prefetch_ahead<kPrefetchBytes>(w + i);
            const __m256 wx = bf16x8(w + i);
            for (int t = 0; t < NT; ++t)
                acc[t] = _mm256_fmadd_ps(wx, _mm256_loadu_ps(reinterpret_cast<const float*>(a + t * stride) + i), acc[t]);
        }
        for (int t = 0; t < NT; ++t) {
            float s = hsum8(acc[t]);
            const auto* y = reinterpret_cast<const float*>(a + t * stride);
            for (int64_t j = i; j < n; ++j) s += bf16_to_fp32(w[j]) * y[j];
            out[t] = s;
        }
    }
};
void deq_f16(const void* src, float* y, int64_t n) {
    const auto* x = static_cast<const f16_bits*>(src);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(x + i))));
    for (; i < n; ++i) y[i] = h2f(x[i]);
}

// ---------------------------------------------------------------- 32-blocks x Q8_0
// 0x10 in byte j where bit j of the little-endian qh word is set (ggml's bytes_from_bits_32).
inline __m256i fifth_bits(const uint8_t* qh) {
    uint32_t x;
    __builtin_memcpy(&x, qh, 4);
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(int(x)), _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
    const __m256i set = _mm256_cmpeq_epi8(_mm256_or_si256(spread, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe)),
                                          _mm256_set1_epi64x(-1));
    return _mm256_and_si256(set, _mm256_set1_epi8(16));
}

// 32-blocks: unsigned q; an offset comes off exactly as kOffset/8 * s32 from each of the 8 lanes.
template <class Block, int kOffset, bool kMin, bool kFive>
struct DotQ32 {
    static constexpr bool kWide = true;
    template <int NT>
    static void run(const void* wv, const Tokens& x, int64_t n, float* out) {
        const auto* b = static_cast<const Block*>(wv);
        RowDots<NT> r(x, n);
        float mins[NT] = {};
        for (int64_t i = 0; i < n / kQK; ++i) {
            prefetch_ahead<kPrefetchBytes>(b + i);  // blocks are at most 24 bytes: every line gets one
            __m256i q = nibbles(b[i].qs);
            if constexpr (kFive) q = _mm256_or_si256(q, fifth_bits(b[i].qh));
            const Halves wq = split_u8(q);
            const float d = h2f(b[i].d);
            for (int t = 0; t < NT; ++t) {
                __m256i dot = r.dot(t, wq, i);
                if constexpr (kOffset != 0) dot = _mm256_sub_epi32(dot, _mm256_set1_epi32(kOffset / 8 * r.v[t].s32[i]));
                r.add(t, dot, _mm256_set1_ps(d * r.v[t].dc[i]));
                if constexpr (kMin) mins[t] += h2f(b[i].m) * r.v[t].dcs[i];
            }
        }
        for (int t = 0; t < NT; ++t) out[t] = r.sum(t) + mins[t];
    }
};

struct DotQ8_0 {
    static constexpr bool kWide = true;
    template <int NT>
    static void run(const void* wv, const Tokens& x, int64_t n, float* out) {
        const auto* b = static_cast<const BlockQ8_0*>(wv);
        RowDots<NT> r(x, n);
        for (int64_t i = 0; i < n / kQK; ++i) {
            prefetch_ahead<kPrefetchBytes>(b + i);  // 34-byte blocks: every line gets one
            const Halves w = split_s8(load256(b[i].qs));
            const float d = h2f(b[i].d);
            for (int t = 0; t < NT; ++t) {
                const __m256i dot = r.dot(t, w, i);
                r.add(t, dot, _mm256_set1_ps(d * r.v[t].dc[i]));
            }
        }
        for (int t = 0; t < NT; ++t) out[t] = r.sum(t);
    }
};

// ---------------------------------------------------------------- K-quants
inline void k4_unpack_scales(const uint8_t* scales, uint32_t u[4]) {  // scales bytes 0-7, mins 8-15
    __builtin_memcpy(u, scales, 12);
    const uint32_t m1 = 0x3f3f3f3f, m2 = 0x0f0f0f0f, m3 = 0x03030303;
    u[3] = ((u[2] >> 4) & m2) | (((u[1] >> 6) & m3) << 4);
    const uint32_t mins_lo = u[1] & m1;
    u[1] = (u[2] & m2) | (((u[0] >> 6) & m3) << 4);
    u[2] = mins_lo;
    u[0] &= m1;
}

// Q4_K and Q5_K: x = d sc q - dmin m, a 6-bit scale and minimum a block of 32 (both its groups).
template <bool kFive>
struct Q45K {
    using Block = std::conditional_t<kFive, BlockQ5_K, BlockQ4_K>;
    static constexpr bool kBlockScales = true, kMins = true, kOffset = false;
    static void prefetch(const Block* p) {  // 144 or 176 bytes: 3 lines
        for (int at : {0, 64, 128, int(sizeof(Block)) - 1}) prefetch_ahead<kPrefetchBytes>(p, at);
    }
    // The 6-bit scales (bytes 0-7 unpacked) and minimums (8-15), one a block.
    static GroupBytes groups(const Block& b) {
        uint32_t u[4];
        k4_unpack_scales(b.scales, u);
        const __m128i v = _mm_loadu_si128((const __m128i*)u);
        return {v, _mm_srli_si128(v, 8)};
    }
    static Halves values(const Block& b, int blk) {
        const __m256i x = load256(b.qs + 32 * (blk / 2));
        __m256i q = _mm256_and_si256((blk & 1) ? _mm256_srli_epi16(x, 4) : x, _mm256_set1_epi8(0x0F));
        if constexpr (kFive)
            q = _mm256_or_si256(q, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(load256(b.qh), blk), _mm256_set1_epi8(1)), 4));
        return split_u8(q);
    }
};

// Q6_K: x = d sc (q - 32), q's low 4 bits in ql and high 2 in qh, an int8 scale a group of 16.
struct Q6K {
    using Block = BlockQ6_K;
    static constexpr bool kBlockScales = false, kMins = false, kOffset = true;
    static void prefetch(const Block* p) {  // 210 bytes: 4 lines
        for (int at : {0, 64, 128, 192}) prefetch_ahead<kPrefetchBytes>(p, at);
    }
    static GroupBytes groups(const Block& b) { return {_mm_loadu_si128((const __m128i*)b.scales), _mm_setzero_si128()}; }
    static Halves values(const Block& b, int blk) {
        const int h = blk / 4, s = blk % 4;
        const __m256i ql = load256(b.ql + 64 * h + 32 * (s % 2));
        const __m256i lo = _mm256_and_si256(s < 2 ? ql : _mm256_srli_epi16(ql, 4), _mm256_set1_epi8(0x0F));
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(load256(b.qh + 32 * h), 2 * s), _mm256_set1_epi8(3));
        return split_u8(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)));
    }
};

struct DotQ8K {
    static constexpr bool kWide = true;
    template <int NT>
    static void run(const void* wv, const Tokens& x, int64_t n, float* out) {
        const auto* b = static_cast<const BlockQ8_K*>(wv);
        RowDots<NT> r(x, n);
        for (int64_t i = 0; i < n / kQKK; ++i) {
            for (int j = 0; j < 8; ++j) {
                if (j % 2 == 0) prefetch_ahead<kPrefetchBytes>(b + i, 32 * j);
                const Halves w = split_s8(load256(b[i].qs + 32 * j));
                const int64_t ab = 8 * i + j;
                for (int t = 0; t < NT; ++t) {
                    const __m256i dot = r.dot(t, w, ab);
                    r.add(t, dot, _mm256_set1_ps(b[i].d * r.v[t].dc[ab]));
                }
            }
        }
        for (int t = 0; t < NT; ++t) out[t] = r.sum(t);
    }
};

// ---------------------------------------------------------------- dequantize / quantize
template <class Block, int kOffset, bool kMin, bool kFive>
void deq_q32(const void* src, float* y, int64_t n) {  // same operations as the reference
    const auto* b = static_cast<const Block*>(src);
    for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
        __m256i q = nibbles(b[i].qs);
        if constexpr (kFive) q = _mm256_or_si256(q, fifth_bits(b[i].qh));
        const __m256 d = _mm256_set1_ps(h2f(b[i].d));
        for (int g = 0; g < 4; ++g) {
            const __m128i part = (g < 2) ? _mm256_castsi256_si128(q) : _mm256_extracti128_si256(q, 1);
            const __m256i v = _mm256_cvtepu8_epi32((g & 1) ? _mm_srli_si128(part, 8) : part);
            __m256 f = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_sub_epi32(v, _mm256_set1_epi32(kOffset))));
            if constexpr (kMin) f = _mm256_add_ps(f, _mm256_set1_ps(h2f(b[i].m)));
            _mm256_storeu_ps(y + 8 * g, f);
        }
    }
}
inline float amax8(__m256 m) {
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_max_ss(x, _mm_movehdup_ps(x)));
}
inline __m256 abs8(const float* x) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_loadu_ps(x)); }
inline int hsum_i32(__m256i v) {
    __m128i x = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0x4E));
    return _mm_cvtsi128_si32(_mm_add_epi32(x, _mm_shuffle_epi32(x, 0xB1)));
}
inline void store_i8x8(int8_t* dst, __m256i v) {  // 8 int32 in [-127, 127] -> 8 bytes
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    _mm_storel_epi64((__m128i*)dst, _mm_packs_epi16(w, w));
}
// Bit-identical to quant_ref.cpp (same operations; _mm256_round_ps and cvtps round half to even).
template <bool kTwoLevel>
void quant_q8x2(const float* x, void* dst, int64_t n) {
    const ActQ8x2 v = act_q8x2(dst, n);
    constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    for (int64_t b = 0; b < n / kActBlock; ++b) {
        const float* xb = x + b * kActBlock;
        const float amax = amax8(_mm256_max_ps(_mm256_max_ps(abs8(xb), abs8(xb + 8)), _mm256_max_ps(abs8(xb + 16), abs8(xb + 24))));
        int32_t s16[2] = {0, 0};
        float d = 0.0f;
        if (amax >= 1e-30f) {
            d = amax / 127.0f;
            const float id = 1.0f / d;
            const __m256 vd = _mm256_set1_ps(d), vid = _mm256_set1_ps(id), vid256 = _mm256_set1_ps(id * 256.0f);
            for (int g = 0; g < 4; ++g) {
                const __m256 xg = _mm256_loadu_ps(xb + 8 * g);
                const __m256 h = _mm256_round_ps(_mm256_mul_ps(xg, vid), kRound);
                const __m256 r = _mm256_fnmadd_ps(vd, h, xg);
                const __m256 l = kTwoLevel ? _mm256_min_ps(_mm256_set1_ps(127.0f), _mm256_max_ps(_mm256_set1_ps(-127.0f),
                                                                                          _mm256_round_ps(_mm256_mul_ps(r, vid256), kRound)))
                                           : _mm256_setzero_ps();
                const __m256i hi = _mm256_cvtps_epi32(h), lo = _mm256_cvtps_epi32(l);
                store_i8x8(v.hi + b * kActBlock + 8 * g, hi);
                store_i8x8(v.lo + b * kActBlock + 8 * g, lo);
                s16[g / 2] += hsum_i32(_mm256_add_epi32(_mm256_slli_epi32(hi, 8), lo));
            }
        } else {
            std::memset(v.hi + b * kActBlock, 0, kActBlock);
            std::memset(v.lo + b * kActBlock, 0, kActBlock);
        }
        finish_q8x2_block(v, b, d, s16);
    }
}

}  // namespace

QuantKernels avx2_kernels(DType type) {
    switch (type) {
        case DType::F32: return {nullptr, rows_job<DotFloat<false>>};
        case DType::F16: return {deq_f16, rows_job<DotFloat<true>>};
        case DType::BF16: return {nullptr, rows_job<DotBf16>};
        case DType::Q4_0: return {deq_q32<BlockQ4_0, 8, false, false>, rows_job<DotQ32<BlockQ4_0, 8, false, false>>};
        case DType::Q4_1: return {deq_q32<BlockQ4_1, 0, true, false>, rows_job<DotQ32<BlockQ4_1, 0, true, false>>};
        case DType::Q5_0: return {deq_q32<BlockQ5_0, 16, false, true>, rows_job<DotQ32<BlockQ5_0, 16, false, true>>};
        case DType::Q5_1: return {deq_q32<BlockQ5_1, 0, true, true>, rows_job<DotQ32<BlockQ5_1, 0, true, true>>};
        case DType::Q8_0: return {nullptr, rows_job<DotQ8_0>};
        case DType::Q4_K: return {nullptr, rows_job<DotKQuant<Q45K<false>>>};
        case DType::Q5_K: return {nullptr, rows_job<DotKQuant<Q45K<true>>>};
        case DType::Q6_K: return {nullptr, rows_job<DotKQuant<Q6K>>};
        case DType::Q8_K: return {nullptr, rows_job<DotQ8K>};
        case DType::Q2_K:
        case DType::Q3_K:
        case DType::IQ4_NL:
        case DType::MXFP4:
        case DType::IQ4_XS: return avx2_low_bit_kernels(type);
        default: return {};
    }
}

ActKernels avx2_act_kernels(ActFormat fmt) {
    return {fmt == ActFormat::Q8x2 ? quant_q8x2<true> : fmt == ActFormat::Q8 ? quant_q8x2<false> : nullptr};
}

}  // namespace strata::cpu
