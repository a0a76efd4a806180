// AVX-512 kernels: int8 dot products on VNNI (_mm512_dpbusd_epi32, unsigned x signed bytes, as
// llama.cpp's x86 kernels), BF16 on _mm512_dpbf16_ps. Built with -mavx512* flags for this file
// only (cpu/CMakeLists.txt); quant.cpp calls in here only when cpu_features() says the CPU can.
// Each dequantize gives the same floats as quant_ref.cpp (same operations, no FMA); each dot
// gives the same integers per block and differs from the reference only in float summation order.
#include <immintrin.h>

// GCC 12's AVX-512 headers trip -W(maybe-)uninitialized on their own _mm512_undefined_* values.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <cmath>

#include "cpu/cpu_features.h"
#include "cpu/quant_ref.h"

namespace strata::cpu {
namespace {

inline float h2f(f16_bits h) { return _cvtsh_ss(h); }
// Weights stream from DRAM once per token group. The hardware prefetcher alone left ~40% of a
// core's read bandwidth unused (4096x4096 Q4_0 GEMV: 5.4 GB/s without, 9 GB/s with this).
// Prefetches never fault, so running past the end of the weights is harmless.
constexpr int kPrefetchBytes = 4096;
inline void prefetch_ahead(const void* p, int offset = 0) {
    _mm_prefetch(static_cast<const char*>(p) + kPrefetchBytes + offset, _MM_HINT_T0);
}
inline __m512i load2x256(const void* lo, const void* hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(static_cast<const __m256i*>(lo))),
                              _mm256_loadu_si256(static_cast<const __m256i*>(hi)), 1);
}

// Runs K::run<NT> for n_tok (1..kMaxTokens) activation rows; NT is a template parameter so each
// token count keeps its accumulators in registers.
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
struct DotF32 {  // F32 weights, F32 activations
    template <int NT>
    static void run(const void* wv, const uint8_t* a, size_t stride, int64_t n, float* out) {
        const auto* w = static_cast<const float*>(wv);
        __m512 acc[NT];
        for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
        for (int64_t i = 0; i < n; i += 16) {
            const __mmask16 k = n - i >= 16 ? 0xFFFF : __mmask16((1u << (n - i)) - 1);
            prefetch_ahead(w + i);
            const __m512 x = _mm512_maskz_loadu_ps(k, w + i);
            for (int t = 0; t < NT; ++t)
                acc[t] = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(k, reinterpret_cast<const float*>(a + t * stride) + i), acc[t]);
        }
        for (int t = 0; t < NT; ++t) out[t] = _mm512_reduce_add_ps(acc[t]);
    }
};
struct DotF16 {  // F16 weights, F32 activations
    template <int NT>
    static void run(const void* wv, const uint8_t* a, size_t stride, int64_t n, float* out) {
        const auto* w = static_cast<const f16_bits*>(wv);
        __m512 acc[NT];
        for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
        for (int64_t i = 0; i < n; i += 16) {
            const __mmask16 k = n - i >= 16 ? 0xFFFF : __mmask16((1u << (n - i)) - 1);
            prefetch_ahead(w + i);
            const __m512 x = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, w + i));
            for (int t = 0; t < NT; ++t)
                acc[t] = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(k, reinterpret_cast<const float*>(a + t * stride) + i), acc[t]);
        }
        for (int t = 0; t < NT; ++t) out[t] = _mm512_reduce_add_ps(acc[t]);
    }
};
struct DotBf16 {  // BF16 x BF16: 32 products per instruction, exact, summed in fp32
    template <int NT>
    static void run(const void* wv, const uint8_t* a, size_t stride, int64_t n, float* out) {
        const auto* w = static_cast<const uint16_t*>(wv);
        __m512 acc[NT];
        for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
        for (int64_t i = 0; i < n; i += 32) {
            const __mmask32 k = n - i >= 32 ? 0xFFFFFFFFu : __mmask32((1u << (n - i)) - 1);
            prefetch_ahead(w + i);
            const __m512bh x = (__m512bh)_mm512_maskz_loadu_epi16(k, w + i);
            for (int t = 0; t < NT; ++t) {
                const auto* y = reinterpret_cast<const uint16_t*>(a + t * stride) + i;
                acc[t] = _mm512_dpbf16_ps(acc[t], x, (__m512bh)_mm512_maskz_loadu_epi16(k, y));
            }
        }
        for (int t = 0; t < NT; ++t) out[t] = _mm512_reduce_add_ps(acc[t]);
    }
};
// For AVX-512 CPUs without avx512bf16 (Cascade Lake): widen both sides to fp32.
inline __m512 bf16x16(__mmask16 k, const uint16_t* p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, p)), 16));
}
struct DotBf16Widen {
    template <int NT>
    static void run(const void* wv, const uint8_t* a, size_t stride, int64_t n, float* out) {
        const auto* w = static_cast<const uint16_t*>(wv);
        __m512 acc[NT];
        for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
        for (int64_t i = 0; i < n; i += 16) {
            const __mmask16 k = n - i >= 16 ? 0xFFFF : __mmask16((1u << (n - i)) - 1);
            prefetch_ahead(w + i);
            const __m512 x = bf16x16(k, w + i);
            for (int t = 0; t < NT; ++t)
                acc[t] = _mm512_fmadd_ps(x, bf16x16(k, reinterpret_cast<const uint16_t*>(a + t * stride) + i), acc[t]);
        }
        for (int t = 0; t < NT; ++t) out[t] = _mm512_reduce_add_ps(acc[t]);
    }
};

// ---------------------------------------------------------------- 32-blocks x Q8_0
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

// Scales of up to 16 consecutive blocks as floats, one per lane (lanes past `count` are 0):
// one gather per 16 blocks instead of a scalar f16 conversion per block. The gather reads the
// 4 bytes at the start of each block, which always lie inside it.
inline __m512 gather_f16(const void* first, int block_bytes, int64_t count) {
    const __mmask16 k = count >= 16 ? 0xFFFF : __mmask16((1u << count) - 1);
    const __m512i idx = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                           _mm512_set1_epi32(block_bytes));
    const __m512i v = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), k, idx, first, 1);
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v));
}
// Lanes 0-7 get lane 2p of s, lanes 8-15 lane 2p+1: the scales of pair p of a 16-block group.
inline __m512 pair_scales(__m512 s, int p) {
    const __m512i idx = _mm512_add_epi32(
        _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi32(1), 1), _mm512_set1_epi32(2 * p));
    return _mm512_permutexvar_ps(idx, s);
}

// w = d * (q - offset) + m with unsigned q. dpbusd multiplies unsigned q by signed activations;
// the offset and the min need sum(a), which a dpbusd against a constant vector gives.
// Blocks go in groups of 16 (scales gathered once) and pairs (one zmm of 64 values); an odd last
// block pairs with itself, its copy weighted 0 by the zero scale lane.
template <class Block>
struct DotQ32 {
    using T = Q32Traits<Block>;
    template <int NT>
    static void run(const void* wv, const uint8_t* a, size_t stride, int64_t n, float* out) {
        const auto* b = static_cast<const Block*>(wv);
        const int64_t nb = n / kQK;
        __m512 acc[NT];
        for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
        const __m512i zero = _mm512_setzero_si512();
        for (int64_t g = 0; g < nb; g += 16) {
            const int64_t cnt = nb - g < 16 ? nb - g : 16;
            const __m512 dw = gather_f16(&b[g].d, sizeof(Block), cnt);
            __m512 mw = _mm512_setzero_ps();
            if constexpr (T::kMin) mw = gather_f16(&b[g].m, sizeof(Block), cnt);
            __m512 sd[NT], sm[NT];
            for (int t = 0; t < NT; ++t) {
                const auto* y = reinterpret_cast<const BlockQ8_0*>(a + t * stride) + g;
                const __m512 da = gather_f16(&y->d, sizeof(BlockQ8_0), cnt);
                sd[t] = _mm512_mul_ps(dw, da);
                if constexpr (T::kMin) sm[t] = _mm512_mul_ps(mw, da);
            }
            for (int p = 0; 2 * p < cnt; ++p) {
                const int64_t i0 = g + 2 * p, i1 = i0 + 1 < nb ? i0 + 1 : i0;
                prefetch_ahead(b + i0);  // a pair is at most 48 bytes: every line gets one
                __m512i q = nibbles2(b[i0].qs, b[i1].qs);
                if constexpr (T::kFive) q = add_fifth_bit(q, b[i0].qh, b[i1].qh);
                for (int t = 0; t < NT; ++t) {
                    const auto* y = reinterpret_cast<const BlockQ8_0*>(a + t * stride);
                    const __m512i av = load2x256(y[i0].qs, y[i1].qs);
                    __m512i dot = _mm512_dpbusd_epi32(zero, q, av);
                    if constexpr (T::kOffset != 0)
                        dot = _mm512_sub_epi32(dot, _mm512_dpbusd_epi32(zero, _mm512_set1_epi8(T::kOffset), av));
                    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), pair_scales(sd[t], p), acc[t]);
                    if constexpr (T::kMin) {
                        const __m512i asum = _mm512_dpbusd_epi32(zero, _mm512_set1_epi8(1), av);
                        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(asum), pair_scales(sm[t], p), acc[t]);
                    }
                }
            }
        }
        for (int t = 0; t < NT; ++t) out[t] = _mm512_reduce_add_ps(acc[t]);
    }
};

// Signed x signed: dpbusd needs one unsigned side, so take |w| and move w's sign onto a.
// Activations are within [-127, 127], so negating them cannot overflow.
inline __m512i dot_s8(__m512i absw, __mmask64 wneg, __m512i a) {
    const __m512i sa = _mm512_mask_sub_epi8(a, wneg, _mm512_setzero_si512(), a);
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), absw, sa);
}

struct DotQ8_0 {
    template <int NT>
    static void run(const void* wv, const uint8_t* a, size_t stride, int64_t n, float* out) {
        const auto* b = static_cast<const BlockQ8_0*>(wv);
        const int64_t nb = n / kQK;
        __m512 acc[NT];
        for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
        for (int64_t g = 0; g < nb; g += 16) {
            const int64_t cnt = nb - g < 16 ? nb - g : 16;
            const __m512 dw = gather_f16(&b[g].d, sizeof(BlockQ8_0), cnt);
            __m512 sd[NT];
            for (int t = 0; t < NT; ++t)
                sd[t] = _mm512_mul_ps(dw, gather_f16(&(reinterpret_cast<const BlockQ8_0*>(a + t * stride) + g)->d,
                                                     sizeof(BlockQ8_0), cnt));
            for (int p = 0; 2 * p < cnt; ++p) {
                const int64_t i0 = g + 2 * p, i1 = i0 + 1 < nb ? i0 + 1 : i0;
                prefetch_ahead(b + i0);
                prefetch_ahead(b + i0, 64);  // a pair is 68 bytes
                const __m512i w = load2x256(b[i0].qs, b[i1].qs);
                const __m512i absw = _mm512_abs_epi8(w);
                const __mmask64 neg = _mm512_movepi8_mask(w);
                for (int t = 0; t < NT; ++t) {
                    const auto* y = reinterpret_cast<const BlockQ8_0*>(a + t * stride);
                    const __m512i dot = dot_s8(absw, neg, load2x256(y[i0].qs, y[i1].qs));
                    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), pair_scales(sd[t], p), acc[t]);
                }
            }
        }
        for (int t = 0; t < NT; ++t) out[t] = _mm512_reduce_add_ps(acc[t]);
    }
};

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
// and lanes 8-15 scale 2c+1, matching where dpbusd leaves each sub-block's partial sums.
inline __m512i pair_index(int c) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(2 * c)), _mm256_set1_epi32(2 * c + 1), 1);
}
// The unpacked scales and mins as a vector, built from registers: storing u[] and loading it
// back as one vector would stall on store forwarding every block.
inline __m128i k4_scales_vec(const uint8_t* scales) {
    uint32_t u[4];
    k4_unpack_scales(scales, u);
    return _mm_set_epi32(int(u[3]), int(u[2]), int(u[1]), int(u[0]));
}
// sum_j min_j * (bsums[2j] + bsums[2j+1]) as 8 int32 lanes; mins are bytes 8-15 of sm.
inline __m256i min_terms(const int16_t* bsums, __m128i sm) {
    const __m256i m16 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm));  // m0 m0 m1 m1 ...
    return _mm256_madd_epi16(_mm256_loadu_si256((const __m256i*)bsums), m16);
}

template <bool kFive>
struct DotQ45K {
    template <int NT>
    static void run(const void* wv, const uint8_t* a, size_t stride, int64_t n, float* out) {
        using Block = std::conditional_t<kFive, BlockQ5_K, BlockQ4_K>;
        const auto* b = static_cast<const Block*>(wv);
        __m512 acc[NT];
        __m256 accm[NT];
        for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps(), accm[t] = _mm256_setzero_ps();
        const __m512i nib = _mm512_set1_epi8(0x0F), zero = _mm512_setzero_si512();
        for (int64_t i = 0; i < n / kQKK; ++i) {
            const __m128i sm = k4_scales_vec(b[i].scales);
            const __m512i sc = _mm512_cvtepu8_epi32(sm);  // lanes 0-7 scales (8-15 mins, unused)
            const float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
            __m512i qh2 = zero;
            if constexpr (kFive) qh2 = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i*)b[i].qh));
            __m512i isum[NT];
            for (int t = 0; t < NT; ++t) isum[t] = zero;
            for (int c = 0; c < 4; ++c) {
                prefetch_ahead(b + i, 64 * c);  // 4 lines cover the 144 or 176 bytes
                const __m256i x = _mm256_loadu_si256((const __m256i*)(b[i].qs + 32 * c));
                __m512i q = _mm512_and_si512(
                    _mm512_inserti64x4(_mm512_castsi256_si512(x), _mm256_srli_epi16(x, 4), 1), nib);
                if constexpr (kFive) {
                    const __m512i bit = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi8(char(1 << 2 * c))),
                                                           _mm256_set1_epi8(char(1 << (2 * c + 1))), 1);
                    q = _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(qh2, bit), q, _mm512_set1_epi8(16));
                }
                const __m512i scv = _mm512_permutexvar_epi32(pair_index(c), sc);
                for (int t = 0; t < NT; ++t) {
                    const auto* y = reinterpret_cast<const BlockQ8_K*>(a + t * stride);
                    const __m512i av = _mm512_loadu_si512(y[i].qs + 64 * c);
                    isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(_mm512_dpbusd_epi32(zero, q, av), scv));
                }
            }
            for (int t = 0; t < NT; ++t) {
                const auto* y = reinterpret_cast<const BlockQ8_K*>(a + t * stride);
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_set1_ps(d * y[i].d), acc[t]);
                const __m256i mt = min_terms(y[i].bsums, sm);
                accm[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mt), _mm256_set1_ps(dmin * y[i].d), accm[t]);
            }
        }
        for (int t = 0; t < NT; ++t) {
            const __m128 m = _mm_add_ps(_mm256_castps256_ps128(accm[t]), _mm256_extractf128_ps(accm[t], 1));
            out[t] = _mm512_reduce_add_ps(acc[t]) - _mm_cvtss_f32(_mm_hadd_ps(_mm_hadd_ps(m, m), _mm_hadd_ps(m, m)));
        }
    }
};

// Q6_K: 6-bit unsigned q with value q - 32; the -32 uses the activations' 16-value sums.
struct DotQ6K {
    template <int NT>
    static void run(const void* wv, const uint8_t* a, size_t stride, int64_t n, float* out) {
        const auto* b = static_cast<const BlockQ6_K*>(wv);
        __m512 acc[NT];
        for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
        const __m512i zero = _mm512_setzero_si512(), nib = _mm512_set1_epi8(0x0F), hb = _mm512_set1_epi8(0x30);
        // Step s of 64 values uses scales 4s..4s+3, each on 4 lanes (16 values).
        const __m512i lane_quarter = _mm512_srli_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), 2);
        for (int64_t i = 0; i < n / kQKK; ++i) {
            const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)b[i].scales));
            const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)b[i].scales));
            const float d = h2f(b[i].d);
            __m512i isum[NT];
            for (int t = 0; t < NT; ++t) {
                // 32 * sum_g scale_g * bsum_g, taken off up front.
                const auto* y = reinterpret_cast<const BlockQ8_K*>(a + t * stride);
                const __m256i corr = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i*)y[i].bsums), sc16);
                isum[t] = _mm512_sub_epi32(zero, _mm512_zextsi256_si512(_mm256_slli_epi32(corr, 5)));
            }
            for (int h = 0; h < 2; ++h) {
                prefetch_ahead(b + i, 128 * h);  // 4 lines cover the 210 bytes
                prefetch_ahead(b + i, 128 * h + 64);
                const __m512i ql = _mm512_loadu_si512(b[i].ql + 64 * h);
                const __m256i qh = _mm256_loadu_si256((const __m256i*)(b[i].qh + 32 * h));
                const __m512i qh2 = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
                // Values 0-63 of this half: low nibbles + bits 0-1 (then 2-3) of qh; 64-127:
                // high nibbles + bits 4-5 (then 6-7).
                const __m512i q[2] = {
                    _mm512_or_si512(_mm512_and_si512(ql, nib), _mm512_and_si512(_mm512_slli_epi16(qh2, 4), hb)),
                    _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), nib), _mm512_and_si512(qh2, hb)),
                };
                for (int s = 0; s < 2; ++s) {
                    const int step = 2 * h + s;
                    const __m512i scv = _mm512_permutexvar_epi32(
                        _mm512_add_epi32(lane_quarter, _mm512_set1_epi32(4 * step)), sc);
                    for (int t = 0; t < NT; ++t) {
                        const auto* y = reinterpret_cast<const BlockQ8_K*>(a + t * stride);
                        const __m512i av = _mm512_loadu_si512(y[i].qs + 64 * step);
                        isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(_mm512_dpbusd_epi32(zero, q[s], av), scv));
                    }
                }
            }
            for (int t = 0; t < NT; ++t) {
                const auto* y = reinterpret_cast<const BlockQ8_K*>(a + t * stride);
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_set1_ps(d * y[i].d), acc[t]);
            }
        }
        for (int t = 0; t < NT; ++t) out[t] = _mm512_reduce_add_ps(acc[t]);
    }
};

struct DotQ8K {
    template <int NT>
    static void run(const void* wv, const uint8_t* a, size_t stride, int64_t n, float* out) {
        const auto* b = static_cast<const BlockQ8_K*>(wv);
        __m512 acc[NT];
        for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
        for (int64_t i = 0; i < n / kQKK; ++i) {
            __m512i isum[NT];
            for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
            prefetch_ahead(b + i, 256);  // 5 lines cover the 292 bytes
            for (int c = 0; c < 4; ++c) {
                prefetch_ahead(b + i, 64 * c);
                const __m512i w = _mm512_loadu_si512(b[i].qs + 64 * c);
                const __m512i absw = _mm512_abs_epi8(w);
                const __mmask64 neg = _mm512_movepi8_mask(w);
                for (int t = 0; t < NT; ++t) {
                    const auto* y = reinterpret_cast<const BlockQ8_K*>(a + t * stride);
                    isum[t] = _mm512_add_epi32(isum[t], dot_s8(absw, neg, _mm512_loadu_si512(y[i].qs + 64 * c)));
                }
            }
            for (int t = 0; t < NT; ++t) {
                const auto* y = reinterpret_cast<const BlockQ8_K*>(a + t * stride);
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_set1_ps(b[i].d * y[i].d), acc[t]);
            }
        }
        for (int t = 0; t < NT; ++t) out[t] = _mm512_reduce_add_ps(acc[t]);
    }
};

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

// ---------------------------------------------------------------- quantize activations
// Bit-identical to quant_ref.cpp: same amax, same d and 1/d, and cvtps rounds half to even.
inline __m512i round_q(__m512 x, __m512 id) { return _mm512_cvtps_epi32(_mm512_mul_ps(x, id)); }
void quant_q8_0(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ8_0*>(dst);
    for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
        const __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
        const float d = amax / 127.0f;
        const __m512 id = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
        y[i].d = fp32_to_fp16(d);
        _mm_storeu_si128((__m128i*)y[i].qs, _mm512_cvtepi32_epi8(round_q(x0, id)));
        _mm_storeu_si128((__m128i*)(y[i].qs + 16), _mm512_cvtepi32_epi8(round_q(x1, id)));
    }
}
void quant_q8_k(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ8_K*>(dst);
    for (int64_t i = 0; i < n / kQKK; ++i, x += kQKK) {
        __m512 mx = _mm512_setzero_ps();
        for (int g = 0; g < 16; ++g) mx = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_loadu_ps(x + 16 * g)));
        const float d = _mm512_reduce_max_ps(mx) / 127.0f;
        const __m512 id = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
        y[i].d = d;
        for (int g = 0; g < 16; ++g) {
            const __m512i q = round_q(_mm512_loadu_ps(x + 16 * g), id);
            _mm_storeu_si128((__m128i*)(y[i].qs + 16 * g), _mm512_cvtepi32_epi8(q));
            y[i].bsums[g] = static_cast<int16_t>(_mm512_reduce_add_epi32(q));
        }
    }
}
void quant_bf16(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<uint16_t*>(dst);
    int64_t i = 0;
    // vcvtneps2bf16 rounds to nearest even like fp32_to_bf16 (NaN payloads may differ).
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i*)(y + i), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(x + i)));
    for (; i < n; ++i) y[i] = fp32_to_bf16(x[i]);
}

}  // namespace

QuantKernels avx512_kernels(DType type) {
    const bool bf16 = cpu_features().avx512bf16;
    switch (type) {
        case DType::F32: return {nullptr, rows<DotF32>, nullptr};
        case DType::F16: return {deq_f16, rows<DotF16>, nullptr};
        case DType::BF16:
            return {deq_bf16, bf16 ? rows<DotBf16> : rows<DotBf16Widen>, bf16 ? quant_bf16 : nullptr};
        case DType::Q4_0: return {deq_q32<BlockQ4_0>, rows<DotQ32<BlockQ4_0>>, nullptr};
        case DType::Q4_1: return {deq_q32<BlockQ4_1>, rows<DotQ32<BlockQ4_1>>, nullptr};
        case DType::Q5_0: return {deq_q32<BlockQ5_0>, rows<DotQ32<BlockQ5_0>>, nullptr};
        case DType::Q5_1: return {deq_q32<BlockQ5_1>, rows<DotQ32<BlockQ5_1>>, nullptr};
        case DType::Q8_0: return {deq_q8_0, rows<DotQ8_0>, quant_q8_0};
        case DType::Q4_K: return {deq_q45k<false>, rows<DotQ45K<false>>, nullptr};
        case DType::Q5_K: return {deq_q45k<true>, rows<DotQ45K<true>>, nullptr};
        case DType::Q6_K: return {deq_q6k, rows<DotQ6K>, nullptr};
        case DType::Q8_K: return {nullptr, rows<DotQ8K>, quant_q8_k};
        default: return {};
    }
}

}  // namespace strata::cpu
