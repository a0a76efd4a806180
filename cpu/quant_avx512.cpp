// AVX-512 kernels: dequantization, Q8x2 activation quantization and the float-weight matmuls
// (F32, F16, BF16 against fp32 activations); the block-quantized matmuls are in gemm_avx512.cpp
// (VNNI) and gemm_amx.cpp. Built with -mavx512* flags for this file only (cpu/CMakeLists.txt);
// quant.cpp calls in here only when cpu_features() says the CPU can. Each dequantize gives the
// same floats as quant_ref.cpp (same operations, no FMA); the quantizer the same bytes; the float
// dots differ from the reference only in summation order.
#include <immintrin.h>

// GCC 12's AVX-512 headers trip -W(maybe-)uninitialized on their own _mm512_undefined_* values.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "cpu/cpu_features.h"
#include "cpu/gemm_x86.h"
#include "cpu/quant_ref.h"
#include "cpu/simd_x86.h"
#include "cpu/transpose_avx512.h"

namespace strata::cpu {
namespace {

// Float-weight decode streams each row from DRAM once per token: prefetch 16 KiB ahead (four
// 4 KiB F16 rows of a 2048-wide matrix; the hardware prefetcher stops at each 4 KiB page).
// F16 5632 x 2048 from DRAM, 2 threads: 8.2-8.3 GB/s at 4 KiB ahead, 9.2-10.4 at 16 KiB.
constexpr int kPrefetchBytes = 16384;
template <class K, int NR>
void rows(const uint8_t* w, size_t w_stride, const uint8_t* a, size_t stride, int n_tok, int64_t n, float* out) {
    switch (n_tok) {
        case 1: K::template run<1, NR>(w, w_stride, a, stride, n, out); break;
        case 2: K::template run<2, NR>(w, w_stride, a, stride, n, out); break;
        case 3: K::template run<3, NR>(w, w_stride, a, stride, n, out); break;
        default: K::template run<4, NR>(w, w_stride, a, stride, n, out); break;
    }
}

// ---------------------------------------------------------------- float weights
// BF16 weights widened to fp32 (a shift): products exact, fp32 sums.
inline __m512 bf16x16(__mmask16 k, const uint16_t* p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, p)), 16));
}
// Weights i..i+15 of a row as fp32 (lanes outside k zero).
template <DType kType>
inline __m512 load_w16(const uint8_t* row, int64_t i, __mmask16 k) {
    if constexpr (kType == DType::F32) return _mm512_maskz_loadu_ps(k, reinterpret_cast<const float*>(row) + i);
    else if constexpr (kType == DType::F16)
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, reinterpret_cast<const f16_bits*>(row) + i));
    else return bf16x16(k, reinterpret_cast<const uint16_t*>(row) + i);
}
// F32, F16 or BF16 weights against F32 activations: NR rows (w_stride bytes apart) at once, so
// that NR streams are read together and each activation load serves NR rows; out[t * NR + r].
// A single row keeps two sets of accumulators, 32 values a step: one set would hold each step
// to the FMA latency (F16, one core, weights in L2: 23 GB/s).
template <DType kType>
struct DotFloat {
    template <int NT, int NR>
    static void run(const uint8_t* w, size_t w_stride, const uint8_t* a, size_t stride, int64_t n, float* out) {
        constexpr int kElemBytes = kType == DType::F32 ? 4 : 2;
        constexpr int kSets = NR == 1 ? 2 : 1, kStep = 16 * kSets;
        constexpr int kLinesPerStep = std::max(1, kStep * kElemBytes / 64);
        auto act = [&](int t, int64_t i, __mmask16 k) {
            return _mm512_maskz_loadu_ps(k, reinterpret_cast<const float*>(a + t * stride) + i);
        };
        __m512 acc[NR][kSets][NT];
        #pragma GCC unroll 4
        for (int r = 0; r < NR; ++r)
        #pragma GCC unroll 2
            for (int s = 0; s < kSets; ++s)
        #pragma GCC unroll 16
                for (int t = 0; t < NT; ++t) acc[r][s][t] = _mm512_setzero_ps();
        int64_t i = 0;
        for (; i + kStep <= n; i += kStep) {
            if ((i * kElemBytes) % 64 == 0)
        #pragma GCC unroll 4
                for (int r = 0; r < NR; ++r)
        #pragma GCC unroll 2
                    for (int line = 0; line < kLinesPerStep; ++line)
                        prefetch_ahead<kPrefetchBytes>(w + r * w_stride + i * kElemBytes, 64 * line);
        #pragma GCC unroll 2
            for (int s = 0; s < kSets; ++s) {
                __m512 x[NT];
        #pragma GCC unroll 16
                for (int t = 0; t < NT; ++t) x[t] = act(t, i + 16 * s, 0xFFFF);
        #pragma GCC unroll 4
                for (int r = 0; r < NR; ++r) {
                    const __m512 wv = load_w16<kType>(w + r * w_stride, i + 16 * s, 0xFFFF);
        #pragma GCC unroll 16
                    for (int t = 0; t < NT; ++t) acc[r][s][t] = _mm512_fmadd_ps(wv, x[t], acc[r][s][t]);
                }
            }
        }
        for (; i < n; i += 16) {
            const __mmask16 k = n - i >= 16 ? 0xFFFF : __mmask16((1u << (n - i)) - 1);
        #pragma GCC unroll 4
            for (int r = 0; r < NR; ++r) {
                const __m512 wv = load_w16<kType>(w + r * w_stride, i, k);
        #pragma GCC unroll 16
                for (int t = 0; t < NT; ++t) acc[r][0][t] = _mm512_fmadd_ps(wv, act(t, i, k), acc[r][0][t]);
            }
        }
        #pragma GCC unroll 4
        for (int r = 0; r < NR; ++r)
        #pragma GCC unroll 16
            for (int t = 0; t < NT; ++t) {
                __m512 sum = acc[r][0][t];
                if constexpr (kSets == 2) sum = _mm512_add_ps(sum, acc[r][1][t]);
                out[t * NR + r] = _mm512_reduce_add_ps(sum);
            }
    }
};

// ---------------------------------------------------------------- block helpers (dequantize)
// Values of blocks b0 and b1 as 64 unsigned bytes, in value order: b0's 32 then b1's 32.
inline __m512i nibbles2(const uint8_t* qs0, const uint8_t* qs1) {
    const __m256i x = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i*)qs0)),
                                              _mm_loadu_si128((const __m128i*)qs1), 1);
    const __m512i z = _mm512_castsi256_si512(x);
    const __m512i dup = _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(1, 1, 0, 0));  // qs0 qs0 qs1 qs1
    // 128-bit lanes 1 and 3 take the high nibbles (values 16..31 of each block).
    const __m512i v = _mm512_mask_blend_epi64(0xCC, dup, _mm512_srli_epi16(dup, 4));
    return _mm512_and_si512(v, _mm512_set1_epi8(0x0F));
}
inline uint32_t qh32(const uint8_t* qh) {
    uint32_t u;
    __builtin_memcpy(&u, qh, 4);
    return u;
}
// The fifth bits: qh bit j is value j, so the two words are directly a byte mask.
inline __m512i add_fifth_bit(__m512i v, const uint8_t* qh0, const uint8_t* qh1) {
    const __mmask64 k = uint64_t(qh32(qh0)) | uint64_t(qh32(qh1)) << 32;
    return _mm512_mask_add_epi8(v, k, v, _mm512_set1_epi8(16));
}

template <class Block> struct Q32Traits;
template <> struct Q32Traits<BlockQ4_0> { static constexpr int kOffset = 8, kMin = 0, kFive = 0; };
template <> struct Q32Traits<BlockQ4_1> { static constexpr int kOffset = 0, kMin = 1, kFive = 0; };
template <> struct Q32Traits<BlockQ5_0> { static constexpr int kOffset = 16, kMin = 0, kFive = 1; };
template <> struct Q32Traits<BlockQ5_1> { static constexpr int kOffset = 0, kMin = 1, kFive = 1; };

// ---------------------------------------------------------------- K-quants x Q8_K
// The 8 six-bit scales (bytes 0-7) and mins (bytes 8-15) of a Q4_K/Q5_K block (ggml's trick).
inline void k4_unpack_scales(const uint8_t* scales, uint32_t u[4]) {
    __builtin_memcpy(u, scales, 12);
    const uint32_t m1 = 0x3f3f3f3f, m2 = 0x0f0f0f0f, m3 = 0x03030303;
    u[3] = ((u[2] >> 4) & m2) | (((u[1] >> 6) & m3) << 4);
    const uint32_t mins_lo = u[1] & m1;
    u[1] = (u[2] & m2) | (((u[0] >> 6) & m3) << 4);
    u[2] = mins_lo;
    u[0] &= m1;
}
// Lane index vectors: for step c (64 values = sub-blocks 2c, 2c+1), lanes 0-7 take scale 2c

// ---------------------------------------------------------------- dequantize
// Same operations as the reference (multiply, then add or subtract; never fused).
void deq_f16(const void* src, float* y, int64_t n) {
    const auto* x = static_cast<const f16_bits*>(src);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = n - i >= 16 ? 0xFFFF : __mmask16((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, k, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, x + i)));
    }
}
void deq_bf16(const void* src, float* y, int64_t n) {
    const auto* x = static_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = n - i >= 16 ? 0xFFFF : __mmask16((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, k, bf16x16(k, x + i));
    }
}
template <class Block>
void deq_q32(const void* src, float* y, int64_t n) {
    using T = Q32Traits<Block>;
    const auto* b = static_cast<const Block*>(src);
    for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
        // Unpack one block into the low half; the top half is a copy, never stored.
        __m512i q = nibbles2(b[i].qs, b[i].qs);
        if constexpr (T::kFive) q = add_fifth_bit(q, b[i].qh, b[i].qh);
        float m = 0;
        if constexpr (T::kMin) m = h2f(b[i].m);
        const __m512 d = _mm512_set1_ps(h2f(b[i].d)), mv = _mm512_set1_ps(m);
        const __m512i off = _mm512_set1_epi32(T::kOffset);
        for (int g = 0; g < 2; ++g) {
            const __m128i part = g == 0 ? _mm512_extracti32x4_epi32(q, 0) : _mm512_extracti32x4_epi32(q, 1);
            __m512 f = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepu8_epi32(part), off)));
            if constexpr (T::kMin) f = _mm512_add_ps(f, mv);
            _mm512_storeu_ps(y + 16 * g, f);
        }
    }
}
void deq_q8_0(const void* src, float* y, int64_t n) {
    const auto* b = static_cast<const BlockQ8_0*>(src);
    for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
        const __m512 d = _mm512_set1_ps(h2f(b[i].d));
        for (int g = 0; g < 2; ++g) {
            const __m128i part = _mm_loadu_si128((const __m128i*)(b[i].qs + 16 * g));
            _mm512_storeu_ps(y + 16 * g, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(part))));
        }
    }
}
template <bool kFive>
void deq_q45k(const void* src, float* y, int64_t n) {
    using Block = std::conditional_t<kFive, BlockQ5_K, BlockQ4_K>;
    const auto* b = static_cast<const Block*>(src);
    for (int64_t i = 0; i < n / kQKK; ++i) {
        uint32_t u[4];
        k4_unpack_scales(b[i].scales, u);
        const auto* sc = reinterpret_cast<const uint8_t*>(u);
        const float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
        __m256i qh = _mm256_setzero_si256();
        if constexpr (kFive) qh = _mm256_loadu_si256((const __m256i*)b[i].qh);
        for (int c = 0; c < 4; ++c) {
            const __m256i x = _mm256_loadu_si256((const __m256i*)(b[i].qs + 32 * c));
            __m256i q[2] = {_mm256_and_si256(x, _mm256_set1_epi8(0x0F)),
                            _mm256_and_si256(_mm256_srli_epi16(x, 4), _mm256_set1_epi8(0x0F))};
            for (int s = 0; s < 2; ++s) {
                const int j = 2 * c + s;
                if constexpr (kFive)
                    q[s] = _mm256_mask_add_epi8(q[s], _mm256_test_epi8_mask(qh, _mm256_set1_epi8(char(1 << j))), q[s],
                                                _mm256_set1_epi8(16));
                const __m512 dj = _mm512_set1_ps(d * float(sc[j])), mj = _mm512_set1_ps(dmin * float(sc[8 + j]));
                for (int g = 0; g < 2; ++g) {
                    const __m128i part = g == 0 ? _mm256_castsi256_si128(q[s]) : _mm256_extracti128_si256(q[s], 1);
                    const __m512 f = _mm512_mul_ps(dj, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(part)));
                    _mm512_storeu_ps(y + 16 * g, _mm512_sub_ps(f, mj));
                }
                y += 32;
            }
        }
    }
}
void deq_q6k(const void* src, float* y, int64_t n) {
    const auto* b = static_cast<const BlockQ6_K*>(src);
    const __m512i nib = _mm512_set1_epi8(0x0F), hb = _mm512_set1_epi8(0x30);
    for (int64_t i = 0; i < n / kQKK; ++i) {
        const float d = h2f(b[i].d);
        for (int h = 0; h < 2; ++h) {
            const __m512i ql = _mm512_loadu_si512(b[i].ql + 64 * h);
            const __m256i qh = _mm256_loadu_si256((const __m256i*)(b[i].qh + 32 * h));
            const __m512i qh2 = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
            const __m512i q[2] = {
                _mm512_or_si512(_mm512_and_si512(ql, nib), _mm512_and_si512(_mm512_slli_epi16(qh2, 4), hb)),
                _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), nib), _mm512_and_si512(qh2, hb)),
            };
            for (int s = 0; s < 2; ++s) {
                for (int g = 0; g < 4; ++g) {
                    const __m128i part = g == 0 ? _mm512_extracti32x4_epi32(q[s], 0)
                                       : g == 1 ? _mm512_extracti32x4_epi32(q[s], 1)
                                       : g == 2 ? _mm512_extracti32x4_epi32(q[s], 2)
                                                : _mm512_extracti32x4_epi32(q[s], 3);
                    const __m512i v = _mm512_sub_epi32(_mm512_cvtepu8_epi32(part), _mm512_set1_epi32(32));
                    const __m512 ds = _mm512_set1_ps(d * float(b[i].scales[(4 * h + 2 * s) * 2 + g]));
                    _mm512_storeu_ps(y + 16 * g, _mm512_mul_ps(ds, _mm512_cvtepi32_ps(v)));
                }
                y += 64;
            }
        }
    }
}

// ---------------------------------------------------------------- quantize activations (Q8x2)
// Bit-identical to quant_ref.cpp: the same amax, d = amax / 127, 1 / d, products, one fused
// multiply-add for the residual; cvtps rounds half to even like nearbyint.
template <bool kTwoLevel>
void quant_q8x2(const float* x, void* dst, int64_t n) {
    const ActQ8x2 v = act_q8x2(dst, n);
    const __m512 lim = _mm512_set1_ps(127.0f), nlim = _mm512_set1_ps(-127.0f);
    for (int64_t b = 0; b < n / kActBlock; ++b) {
        const float* xb = x + b * kActBlock;
        const __m512 x0 = _mm512_loadu_ps(xb), x1 = _mm512_loadu_ps(xb + 16);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
        int32_t s16[2] = {0, 0};
        float d = 0.0f;
        if (amax >= 1e-30f) {
            d = amax / 127.0f;
            const float id = 1.0f / d;
            const __m512 vd = _mm512_set1_ps(d), vid = _mm512_set1_ps(id), vid256 = _mm512_set1_ps(id * 256.0f);
            for (int g = 0; g < 2; ++g) {
                const __m512 xg = g ? x1 : x0;
                const __m512 h = _mm512_roundscale_ps(_mm512_mul_ps(xg, vid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                const __m512 r = _mm512_fnmadd_ps(vd, h, xg);
                const __m512 l = kTwoLevel ? _mm512_min_ps(lim, _mm512_max_ps(nlim, _mm512_roundscale_ps(
                                                                                    _mm512_mul_ps(r, vid256),
                                                                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)))
                                           : _mm512_setzero_ps();
                const __m512i hi = _mm512_cvtps_epi32(h), lo = _mm512_cvtps_epi32(l);
                _mm_storeu_si128((__m128i*)(v.hi + b * kActBlock + 16 * g), _mm512_cvtepi32_epi8(hi));
                _mm_storeu_si128((__m128i*)(v.lo + b * kActBlock + 16 * g), _mm512_cvtepi32_epi8(lo));
                s16[g] = _mm512_reduce_add_epi32(_mm512_add_epi32(_mm512_slli_epi32(hi, 8), lo));
            }
        } else {
            std::memset(v.hi + b * kActBlock, 0, kActBlock);
            std::memset(v.lo + b * kActBlock, 0, kActBlock);
        }
        finish_q8x2_block(v, b, d, s16);
    }
}
void quant_f32(const float* x, void* dst, int64_t n) { std::memcpy(dst, x, n * sizeof(float)); }

// ---------------------------------------------------------------- float-weight matmul
// Few tokens: one pass over each weight row per group of up to 4 tokens (DotFloat).
// More tokens: 16 rows are converted once to fp32 and transposed into a per-thread buffer
// (p[k] = the 16 rows' values at column k), two such tiles at a time, and each group of 8 tokens
// is one broadcast FMA per column, token and tile (float_tile2), the buffers read from L2.
template <DType kType>
void pack_float16(const MatmulJob& job, int64_t r0, int n_valid, float* p) {
    const int64_t n = job.n_cols;
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = n - i >= 16 ? 0xFFFF : __mmask16((1u << (n - i)) - 1);
        __m512 r[16];
        for (int j = 0; j < 16; ++j)
            r[j] = j < n_valid ? load_w16<kType>(job.w + (r0 + j) * job.w_stride, i, k) : _mm512_setzero_ps();
        transpose16(r);
        for (int j = 0; j < 16 && i + j < n; ++j) _mm512_store_ps(p + (i + j) * 16, r[j]);
    }
}
// 8 tokens (lanes off..off+7 of a 16-token xt group; padding tokens are zeros) x 32 rows (two
// packed 16-row tiles): each broadcast activation feeds 2 FMAs and each weight load 8, so loads
// stay below the FMA rate (one tile x 16 tokens needed 17 loads per 16 FMAs: 55 GMAC/s on one
// core; this shape: see BENCHMARKS.md).
void float_tile2(const float* p0, const float* p1, const float* xg, int off, int64_t n_cols, float* y, int64_t ldy,
                 int n_tok, int n_rows) {
    __m512 a0[8], a1[8];
#pragma GCC unroll 8
    for (int t = 0; t < 8; ++t) a0[t] = a1[t] = _mm512_setzero_ps();
    for (int64_t k = 0; k < n_cols; ++k) {
        const __m512 w0 = _mm512_load_ps(p0 + 16 * k), w1 = _mm512_load_ps(p1 + 16 * k);
#pragma GCC unroll 8
        for (int t = 0; t < 8; ++t) {
            const __m512 x = _mm512_set1_ps(xg[16 * k + off + t]);
            a0[t] = _mm512_fmadd_ps(w0, x, a0[t]);
            a1[t] = _mm512_fmadd_ps(w1, x, a1[t]);
        }
    }
    const __mmask16 k0 = n_rows >= 16 ? 0xFFFF : __mmask16((1u << n_rows) - 1);
    const __mmask16 k1 = n_rows >= 32 ? 0xFFFF : n_rows <= 16 ? 0 : __mmask16((1u << (n_rows - 16)) - 1);
    for (int t = 0; t < n_tok; ++t) {
        _mm512_mask_storeu_ps(y + t * ldy, k0, a0[t]);
        _mm512_mask_storeu_ps(y + t * ldy + 16, k1, a1[t]);
    }
}
template <DType kType, class Dot>
void float_matmul(const MatmulJob& job, int64_t r0, int64_t r1) {
    if (job.n_tok <= 4 || !job.xt) {
        constexpr int kRows = 4;  // rows streamed together
        float out[4 * kRows];
        for (int64_t t0 = 0; t0 < job.n_tok; t0 += 4) {
            const int nt = static_cast<int>(std::min<int64_t>(4, job.n_tok - t0));
            const uint8_t* a = job.acts + t0 * job.a_stride;
            int64_t r = r0;
            for (; r + kRows <= r1; r += kRows) {
                rows<Dot, kRows>(job.w + r * job.w_stride, job.w_stride, a, job.a_stride, nt, job.n_cols, out);
                for (int t = 0; t < nt; ++t)
                    for (int i = 0; i < kRows; ++i) job.y[(t0 + t) * job.ldy + r + i] = out[t * kRows + i];
            }
            for (; r < r1; ++r) {
                rows<Dot, 1>(job.w + r * job.w_stride, job.w_stride, a, job.a_stride, nt, job.n_cols, out);
                for (int t = 0; t < nt; ++t) job.y[(t0 + t) * job.ldy + r] = out[t];
            }
        }
        return;
    }
    auto* p = reinterpret_cast<float*>(thread_scratch(0, sizeof(float) * 32 * (job.n_cols + 16)));
    float* p1 = p + 16 * (job.n_cols + 16);
    for (int64_t r = r0; r < r1; r += 32) {
        const int n_rows = static_cast<int>(std::min<int64_t>(32, r1 - r));
        pack_float16<kType>(job, r, std::min(16, n_rows), p);
        if (n_rows > 16) pack_float16<kType>(job, r + 16, n_rows - 16, p1);
        const float* q1 = n_rows > 16 ? p1 : p;  // a lone last tile: computed twice, stored once
        for (int64_t t0 = 0; t0 < job.n_tok; t0 += 8) {
            const float* xg = job.xt + (t0 / 16) * job.n_cols * 16;
            const int nt = static_cast<int>(std::min<int64_t>(8, job.n_tok - t0));
            float_tile2(p, q1, xg, static_cast<int>(t0 % 16), job.n_cols, job.y + t0 * job.ldy + r, job.ldy, nt, n_rows);
        }
    }
}

}  // namespace

QuantKernels avx512_kernels(DType type) {
    QuantKernels k;
    switch (type) {
        case DType::F32: k = {nullptr, float_matmul<DType::F32, DotFloat<DType::F32>>}; break;
        case DType::F16: k = {deq_f16, float_matmul<DType::F16, DotFloat<DType::F16>>}; break;
        case DType::BF16: k = {deq_bf16, float_matmul<DType::BF16, DotFloat<DType::BF16>>}; break;
        case DType::Q4_0: k.dequantize = deq_q32<BlockQ4_0>; break;
        case DType::Q4_1: k.dequantize = deq_q32<BlockQ4_1>; break;
        case DType::Q5_0: k.dequantize = deq_q32<BlockQ5_0>; break;
        case DType::Q5_1: k.dequantize = deq_q32<BlockQ5_1>; break;
        case DType::Q8_0: k.dequantize = deq_q8_0; break;
        case DType::Q4_K: k.dequantize = deq_q45k<false>; break;
        case DType::Q5_K: k.dequantize = deq_q45k<true>; break;
        case DType::Q6_K: k.dequantize = deq_q6k; break;
        default: break;
    }
    if (!k.matmul_rows) {
        // AMX where the CPU has it (it hands small batches to VNNI itself), else VNNI.
        MatmulRowsFn amx = amx_usable() ? amx_matmul(type) : nullptr;
        k.matmul_rows = amx ? amx : avx512_vnni_matmul(type);
    }
    return k;
}

ActKernels avx512_act_kernels(ActFormat fmt) {
    return {fmt == ActFormat::F32 ? quant_f32 : fmt == ActFormat::Q8 ? quant_q8x2<false> : quant_q8x2<true>};
}

}  // namespace strata::cpu
