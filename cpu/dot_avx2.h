#pragma once
// Internal to cpu/'s AVX2 kernel files (quant_avx2.cpp, quant_low_bit_avx2.cpp), included only by
// files built with AVX2 flags. Block-quantized weights: each activation value of Q8x2 as one
// int16 c = 256 hi + lo (|c| <= 32639), widened once per token and task (widen_acts), times the
// weights' bytes widened to int16 with _mm256_madd_epi16: two integer multiplies per 32 values,
// where dotting hi and lo bytes apart with _mm256_maddubs_epi16 (as llama.cpp's AVX2 code dots
// its one level) took four and a shift. Lane j of a block's integer holds the exact sum over its
// values 4j..4j+3, as that byte form gave it, so the float scaling and every bit of the result
// are the same. A weight row is read once for up to kMaxTokens tokens.
#include <immintrin.h>

#include <algorithm>

#include "cpu/gemm_x86.h"
#include "cpu/quant_ref.h"
#include "cpu/simd_x86.h"

namespace strata::cpu {

// quant_low_bit_avx2.cpp: Q2_K, Q3_K, IQ4_NL, MXFP4 and IQ4_XS (none for other types).
QuantKernels avx2_low_bit_kernels(DType type);

// In an unnamed namespace: each kernel file keeps its own copy, built with its own flags.
namespace {

// How far ahead the weights are prefetched (see quant_avx512.cpp for the float kernels' choice).
constexpr int kPrefetchBytes = 4096;
inline float hsum8(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_add_ss(x, _mm_movehdup_ps(x)));
}
inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Up to kMaxTokens token rows a pass over a weight row: the activations as stored (`a`,
// `stride` bytes apart) and, for block-quantized weights, widened (`c`, c_stride values apart).
inline constexpr int kMaxTokens = 8;
struct Tokens {
    const uint8_t* a;
    size_t stride;
    const int16_t* c;
    int64_t c_stride;
};

template <class K, int NT = kMaxTokens>
void rows(const void* w, const Tokens& x, int n_tok, int64_t n, float* out) {
    if constexpr (NT > 1)
        if (n_tok < NT) return rows<K, NT - 1>(w, x, n_tok, n, out);
    K::template run<NT>(w, x, n, out);
}

inline __m256i nibbles(const uint8_t* qs) {  // 32 values 0..15 in value order
    const __m128i x = _mm_loadu_si128((const __m128i*)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(x, 4), x), _mm256_set1_epi8(0x0F));
}

// 32 bytes as int16: the even bytes' (values 4j and 4j+2 in 32-bit lane j) and the odd
// bytes' (4j+1 and 4j+3), sign- or zero-extended.
struct Halves {
    __m256i even, odd;
};
inline __m256i even_s16(__m256i x) { return _mm256_srai_epi16(_mm256_slli_epi16(x, 8), 8); }
inline Halves split_s8(__m256i x) { return {even_s16(x), _mm256_srai_epi16(x, 8)}; }
inline Halves split_u8(__m256i x) { return {_mm256_and_si256(x, _mm256_set1_epi16(0x00FF)), _mm256_srli_epi16(x, 8)}; }

// A token's n activation values widened: per 32-value block, c of the even bytes' values then
// of the odd bytes' (as split_* lays out the weights).
void widen_acts(const uint8_t* row, int64_t n, int16_t* c) {
    const ActQ8x2 v = act_q8x2(row, n);
    for (int64_t b = 0; b < n / kActBlock; ++b, c += kActBlock) {
        const Halves hi = split_s8(load256(v.hi + kActBlock * b)), lo = split_s8(load256(v.lo + kActBlock * b));
        _mm256_storeu_si256((__m256i*)c, _mm256_add_epi16(_mm256_slli_epi16(hi.even, 8), lo.even));
        _mm256_storeu_si256((__m256i*)(c + 16), _mm256_add_epi16(_mm256_slli_epi16(hi.odd, 8), lo.odd));
    }
}

// The exact block integer, sum of q * c over values 4j..4j+3 in lane j, from a block's widened
// activations.
inline __m256i idot(const Halves& q, const int16_t* c) {
    return _mm256_add_epi32(_mm256_madd_epi16(q.even, load256(c)), _mm256_madd_epi16(q.odd, load256(c + 16)));
}
// A pass's state over one weight row: each token's activations (as stored and widened) and
// its float accumulator of 8 lanes.
template <int NT>
struct RowDots {
    ActQ8x2 v[NT];
    const int16_t* c[NT];
    __m256 acc[NT];
    RowDots(const Tokens& x, int64_t n) {
        for (int t = 0; t < NT; ++t)
            v[t] = act_q8x2(x.a + t * x.stride, n), c[t] = x.c + t * x.c_stride, acc[t] = _mm256_setzero_ps();
    }
    // Token t's exact integer of activation block ab against w (idot).
    __m256i dot(int t, const Halves& w, int64_t ab) const { return idot(w, c[t] + kActBlock * ab); }
    // Token t's accumulator += a block's integer lanes times their scales.
    void add(int t, __m256i dot, __m256 scale) { acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, acc[t]); }
    float sum(int t) const { return hsum8(acc[t]); }
};

// Rows [r0, r1), tokens in groups of up to kMaxTokens per pass over a weight row (each group's
// activations widened once for all the rows).
template <class K>
void rows_job(const MatmulJob& job, int64_t r0, int64_t r1) {
    float out[kMaxTokens];
    int16_t* wide = K::kWide ? reinterpret_cast<int16_t*>(thread_scratch(0, sizeof(int16_t) * kMaxTokens * job.n_cols)) : nullptr;
    for (int64_t t0 = 0; t0 < job.n_tok; t0 += kMaxTokens) {
        const int nt = static_cast<int>(std::min<int64_t>(kMaxTokens, job.n_tok - t0));
        const Tokens x{job.acts + t0 * job.a_stride, job.a_stride, wide, job.n_cols};
        if constexpr (K::kWide)
            for (int t = 0; t < nt; ++t) widen_acts(x.a + t * x.stride, job.n_cols, wide + t * job.n_cols);
        for (int64_t r = r0; r < r1; ++r) {
            rows<K>(job.w + r * job.w_stride, x, nt, job.n_cols, out);
            for (int t = 0; t < nt; ++t) job.y[(t0 + t) * job.ldy + r] = out[t];
        }
    }
}

}  // namespace
}  // namespace strata::cpu
