// AVX2 kernels for CPUs without AVX-512 VNNI: unsigned x signed byte products with
// _mm256_maddubs_epi16 (pairs stay below 2^15 for every type here), widened and scaled by
// _mm256_madd_epi16, as in llama.cpp's AVX2 code. Built with -mavx2 -mfma -mf16c -mno-avx512f for
// this file only, so it never uses an instruction the avx2 path may not have. Types not listed
// in avx2_kernels() use the scalar reference.
#include <immintrin.h>

#include "cpu/quant_ref.h"

namespace strata::cpu {
namespace {

inline float h2f(f16_bits h) { return _cvtsh_ss(h); }
// Weights stream from DRAM; software prefetch well ahead lets one core use its bandwidth
// (see quant_avx512.cpp). Prefetches never fault.
constexpr int kPrefetchBytes = 4096;
inline void prefetch_ahead(const void* p, int offset = 0) {
    _mm_prefetch(static_cast<const char*>(p) + kPrefetchBytes + offset, _MM_HINT_T0);
}
inline float hsum8(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_add_ss(x, _mm_movehdup_ps(x)));
}
// u8 x s8 -> 8 int32 lanes, each the sum of 4 adjacent products.
inline __m256i dot_u8s8(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}
// s8 x s8 via |x| and x's sign moved onto y (y within [-127, 127]).
inline __m256i dot_s8s8(__m256i x, __m256i y) { return dot_u8s8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x)); }
inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

template <class K>
void rows(const void* w, const void* a, size_t stride, int n_tok, int64_t n, float* out) {
    const auto* y = static_cast<const uint8_t*>(a);
    switch (n_tok) {
        case 1: K::template run<1>(w, y, stride, n, out); break;
        case 2: K::template run<2>(w, y, stride, n, out); break;
        case 3: K::template run<3>(w, y, stride, n, out); break;
        default: K::template run<4>(w, y, stride, n, out); break;
    }
}

// ---------------------------------------------------------------- float weights
template <bool kHalf>
struct DotFloat {  // F32 or F16 weights against F32 activations; a scalar tail
    template <int NT>
    static void run(const void* wv, const uint8_t* a, size_t stride, int64_t n, float* out) {
        __m256 acc[NT];
        for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
        auto wload = [&](int64_t i) {
            if constexpr (kHalf) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(static_cast<const f16_bits*>(wv) + i)));
            else return _mm256_loadu_ps(static_cast<const float*>(wv) + i);
        };
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) {
            if (i % 16 == 0) prefetch_ahead(static_cast<const uint8_t*>(wv) + i * (kHalf ? 2 : 4));
            const __m256 x = wload(i);
            for (int t = 0; t < NT; ++t)
                acc[t] = _mm256_fmadd_ps(x, _mm256_loadu_ps(reinterpret_cast<const float*>(a + t * stride) + i), acc[t]);
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

// BF16 x BF16 without avx512bf16: widen both to fp32 (a shift), products exact, fp32 sums.
inline __m256 bf16x8(const uint16_t* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)p)), 16));
}
struct DotBf16 {
    template <int NT>
    static void run(const void* wv, const uint8_t* a, size_t stride, int64_t n, float* out) {
        const auto* w = static_cast<const uint16_t*>(wv);
        __m256 acc[NT];
        for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) {
            if (i % 32 == 0) prefetch_ahead(w + i);
            const __m256 x = bf16x8(w + i);
            for (int t = 0; t < NT; ++t)
                acc[t] = _mm256_fmadd_ps(x, bf16x8(reinterpret_cast<const uint16_t*>(a + t * stride) + i), acc[t]);
        }
        for (int t = 0; t < NT; ++t) {
            float s = hsum8(acc[t]);
            const auto* y = reinterpret_cast<const uint16_t*>(a + t * stride);
            for (int64_t j = i; j < n; ++j) s += bf16_to_fp32(w[j]) * bf16_to_fp32(y[j]);
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
inline __m256i nibbles(const uint8_t* qs) {  // 32 values 0..15 in value order
    const __m128i x = _mm_loadu_si128((const __m128i*)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(x, 4), x), _mm256_set1_epi8(0x0F));
}
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

template <class Block, int kOffset, bool kMin, bool kFive>
struct DotQ32 {
    template <int NT>
    static void run(const void* wv, const uint8_t* a, size_t stride, int64_t n, float* out) {
        const auto* b = static_cast<const Block*>(wv);
        __m256 acc[NT];
        for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
        for (int64_t i = 0; i < n / kQK; ++i) {
            prefetch_ahead(b + i);  // blocks are at most 24 bytes: every line gets one
            __m256i q = nibbles(b[i].qs);
            if constexpr (kFive) q = _mm256_or_si256(q, fifth_bits(b[i].qh));
            // With an offset the values are signed: use the sign trick on q - offset.
            if constexpr (kOffset != 0) q = _mm256_sub_epi8(q, _mm256_set1_epi8(kOffset));
            const float d = h2f(b[i].d);
            for (int t = 0; t < NT; ++t) {
                const auto* y = reinterpret_cast<const BlockQ8_0*>(a + t * stride);
                const __m256i av = load256(y[i].qs);
                const float da = h2f(y[i].d);
                const __m256i dot = kOffset != 0 ? dot_s8s8(q, av) : dot_u8s8(q, av);
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(d * da), acc[t]);
                if constexpr (kMin) {
                    const __m256i asum = dot_u8s8(_mm256_set1_epi8(1), av);
                    acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(asum), _mm256_set1_ps(h2f(b[i].m) * da), acc[t]);
                }
            }
        }
        for (int t = 0; t < NT; ++t) out[t] = hsum8(acc[t]);
    }
};

struct DotQ8_0 {
    template <int NT>
    static void run(const void* wv, const uint8_t* a, size_t stride, int64_t n, float* out) {
        const auto* b = static_cast<const BlockQ8_0*>(wv);
        __m256 acc[NT];
        for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
        for (int64_t i = 0; i < n / kQK; ++i) {
            prefetch_ahead(b + i);  // 34-byte blocks: every line gets one
            const __m256i w = load256(b[i].qs);
            const float d = h2f(b[i].d);
            for (int t = 0; t < NT; ++t) {
                const auto* y = reinterpret_cast<const BlockQ8_0*>(a + t * stride);
                const __m256i dot = dot_s8s8(w, load256(y[i].qs));
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(d * h2f(y[i].d)), acc[t]);
            }
        }
        for (int t = 0; t < NT; ++t) out[t] = hsum8(acc[t]);
    }
};

// ---------------------------------------------------------------- K-quants x Q8_K
inline void k4_unpack_scales(const uint8_t* scales, uint32_t u[4]) {  // scales bytes 0-7, mins 8-15
    __builtin_memcpy(u, scales, 12);
    const uint32_t m1 = 0x3f3f3f3f, m2 = 0x0f0f0f0f, m3 = 0x03030303;
    u[3] = ((u[2] >> 4) & m2) | (((u[1] >> 6) & m3) << 4);
    const uint32_t mins_lo = u[1] & m1;
    u[1] = (u[2] & m2) | (((u[0] >> 6) & m3) << 4);
    u[2] = mins_lo;
    u[0] &= m1;
}
inline int hsum_i32(__m256i v) {
    __m128i x = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0x4E));
    return _mm_cvtsi128_si32(_mm_add_epi32(x, _mm_shuffle_epi32(x, 0xB1)));
}

template <bool kFive>
struct DotQ45K {
    template <int NT>
    static void run(const void* wv, const uint8_t* a, size_t stride, int64_t n, float* out) {
        using Block = std::conditional_t<kFive, BlockQ5_K, BlockQ4_K>;
        const auto* b = static_cast<const Block*>(wv);
        __m256 acc[NT];
        float mins[NT] = {};
        for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
        for (int64_t i = 0; i < n / kQKK; ++i) {
            uint32_t u[4];
            k4_unpack_scales(b[i].scales, u);
            // Scales and mins taken from registers, not reloaded from u[] (store forwarding).
            const __m128i sm = _mm_set_epi32(int(u[3]), int(u[2]), int(u[1]), int(u[0]));
            const float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
            __m256i qh = _mm256_setzero_si256();
            if constexpr (kFive) qh = load256(b[i].qh);
            __m256i isum[NT];
            for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
            for (int j = 0; j < 8; ++j) {
                if (j % 2 == 0) prefetch_ahead(b + i, 32 * j);  // 4 lines cover the block
                const __m256i x = load256(b[i].qs + 32 * (j / 2));
                __m256i q = _mm256_and_si256((j & 1) ? _mm256_srli_epi16(x, 4) : x, _mm256_set1_epi8(0x0F));
                if constexpr (kFive)
                    q = _mm256_or_si256(q, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, j), _mm256_set1_epi8(1)), 4));
                const __m256i scv = _mm256_set1_epi16(int16_t((u[j / 4] >> (8 * (j % 4))) & 0xFF));
                for (int t = 0; t < NT; ++t) {
                    const auto* y = reinterpret_cast<const BlockQ8_K*>(a + t * stride);
                    const __m256i p16 = _mm256_maddubs_epi16(q, load256(y[i].qs + 32 * j));
                    isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(p16, scv));
                }
            }
            const __m256i m16 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm));  // m0 m0 m1 m1 ...
            for (int t = 0; t < NT; ++t) {
                const auto* y = reinterpret_cast<const BlockQ8_K*>(a + t * stride);
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_set1_ps(d * y[i].d), acc[t]);
                mins[t] += dmin * y[i].d * float(hsum_i32(_mm256_madd_epi16(load256(y[i].bsums), m16)));
            }
        }
        for (int t = 0; t < NT; ++t) out[t] = hsum8(acc[t]) - mins[t];
    }
};

struct DotQ6K {
    template <int NT>
    static void run(const void* wv, const uint8_t* a, size_t stride, int64_t n, float* out) {
        const auto* b = static_cast<const BlockQ6_K*>(wv);
        __m256 acc[NT];
        for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
        const __m256i nib = _mm256_set1_epi8(0x0F), two = _mm256_set1_epi8(3);
        for (int64_t i = 0; i < n / kQKK; ++i) {
            const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)b[i].scales));
            const float d = h2f(b[i].d);
            __m256i isum[NT];
            for (int t = 0; t < NT; ++t) {  // start from -32 * sum_g scale_g * bsum_g
                const auto* y = reinterpret_cast<const BlockQ8_K*>(a + t * stride);
                isum[t] = _mm256_sub_epi32(_mm256_setzero_si256(),
                                           _mm256_slli_epi32(_mm256_madd_epi16(load256(y[i].bsums), sc16), 5));
            }
            for (int h = 0; h < 2; ++h) {
                prefetch_ahead(b + i, 128 * h);  // 4 lines cover the 210 bytes
                prefetch_ahead(b + i, 128 * h + 64);
                const __m256i ql0 = load256(b[i].ql + 64 * h), ql1 = load256(b[i].ql + 64 * h + 32);
                const __m256i qh = load256(b[i].qh + 32 * h);
                auto hi2 = [&](int shift) {  // bits shift..shift+1 of qh moved to bits 4-5
                    return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, shift), two), 4);
                };
                const __m256i q[4] = {
                    _mm256_or_si256(_mm256_and_si256(ql0, nib), hi2(0)),
                    _mm256_or_si256(_mm256_and_si256(ql1, nib), hi2(2)),
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), nib), hi2(4)),
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), nib), hi2(6)),
                };
                for (int s = 0; s < 4; ++s) {
                    const int g = 8 * h + 2 * s;  // the two 16-value scales of these 32 values
                    const __m256i scv = _mm256_set_m128i(_mm_set1_epi16(b[i].scales[g + 1]), _mm_set1_epi16(b[i].scales[g]));
                    for (int t = 0; t < NT; ++t) {
                        const auto* y = reinterpret_cast<const BlockQ8_K*>(a + t * stride);
                        const __m256i p16 = _mm256_maddubs_epi16(q[s], load256(y[i].qs + 128 * h + 32 * s));
                        isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(p16, scv));
                    }
                }
            }
            for (int t = 0; t < NT; ++t) {
                const auto* y = reinterpret_cast<const BlockQ8_K*>(a + t * stride);
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_set1_ps(d * y[i].d), acc[t]);
            }
        }
        for (int t = 0; t < NT; ++t) out[t] = hsum8(acc[t]);
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
// Bit-identical to the reference: same scale and reciprocal, cvtps rounds half to even.
// Returns the 8 rounded values of x[0..7] packed to int8 in the low 8 bytes.
inline __m128i q8x8(const float* x, __m256 id) {
    const __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), id));
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    return _mm_packs_epi16(w, w);
}
inline __m256 abs8(const float* x) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_loadu_ps(x)); }
void quant_q8_0(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ8_0*>(dst);
    for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
        const __m256 m = _mm256_max_ps(_mm256_max_ps(abs8(x), abs8(x + 8)), _mm256_max_ps(abs8(x + 16), abs8(x + 24)));
        const float d = amax8(m) / 127.0f;
        const __m256 id = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
        y[i].d = fp32_to_fp16(d);
        for (int g = 0; g < 4; ++g) _mm_storel_epi64((__m128i*)(y[i].qs + 8 * g), q8x8(x + 8 * g, id));
    }
}
void quant_q8_k(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ8_K*>(dst);
    for (int64_t i = 0; i < n / kQKK; ++i, x += kQKK) {
        __m256 m = _mm256_setzero_ps();
        for (int g = 0; g < 32; ++g) m = _mm256_max_ps(m, abs8(x + 8 * g));
        const float d = amax8(m) / 127.0f;
        const __m256 id = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
        y[i].d = d;
        for (int g = 0; g < 32; ++g) _mm_storel_epi64((__m128i*)(y[i].qs + 8 * g), q8x8(x + 8 * g, id));
        for (int g = 0; g < 16; ++g) {
            const __m128i q = _mm_loadu_si128((const __m128i*)(y[i].qs + 16 * g));
            const __m128i s16 = _mm_maddubs_epi16(_mm_set1_epi8(1), q);
            __m128i s = _mm_madd_epi16(s16, _mm_set1_epi16(1));
            s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
            y[i].bsums[g] = static_cast<int16_t>(_mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1))));
        }
    }
}

}  // namespace

QuantKernels avx2_kernels(DType type) {
    switch (type) {
        case DType::F32: return {nullptr, rows<DotFloat<false>>, nullptr};
        case DType::F16: return {deq_f16, rows<DotFloat<true>>, nullptr};
        case DType::BF16: return {nullptr, rows<DotBf16>, nullptr};
        case DType::Q4_0: return {deq_q32<BlockQ4_0, 8, false, false>, rows<DotQ32<BlockQ4_0, 8, false, false>>, nullptr};
        case DType::Q4_1: return {deq_q32<BlockQ4_1, 0, true, false>, rows<DotQ32<BlockQ4_1, 0, true, false>>, nullptr};
        case DType::Q5_0: return {deq_q32<BlockQ5_0, 16, false, true>, rows<DotQ32<BlockQ5_0, 16, false, true>>, nullptr};
        case DType::Q5_1: return {deq_q32<BlockQ5_1, 0, true, true>, rows<DotQ32<BlockQ5_1, 0, true, true>>, nullptr};
        case DType::Q8_0: return {nullptr, rows<DotQ8_0>, quant_q8_0};
        case DType::Q4_K: return {nullptr, rows<DotQ45K<false>>, nullptr};
        case DType::Q5_K: return {nullptr, rows<DotQ45K<true>>, nullptr};
        case DType::Q6_K: return {nullptr, rows<DotQ6K>, nullptr};
        case DType::Q8_K: return {nullptr, nullptr, quant_q8_k};
        default: return {};
    }
}

}  // namespace strata::cpu
