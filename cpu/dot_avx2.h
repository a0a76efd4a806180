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

// A super-block's 16 groups of 16 values, one float each: groups 0-7 and 8-15.
struct Groups {
    __m256 lo, hi;
};
// Eight int8 (bytes 0-7 of s8) as floats.
inline __m256 floats8(__m128i s8) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(s8)); }
// The groups' int8 scales (or minimums) times d, as the scalar d * float(s) gives each.
inline Groups scaled(__m128i s8, float d) {
    const __m256 vd = _mm256_set1_ps(d);
    return {_mm256_mul_ps(vd, floats8(s8)), _mm256_mul_ps(vd, floats8(_mm_srli_si128(s8, 8)))};
}
// Each activation block's scale (8 of them, one per 32 values) for each of its two groups.
inline Groups per_group(const float* dc) {
    const __m256 v = _mm256_loadu_ps(dc);
    return {_mm256_permutevar8x32_ps(v, _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3)),
            _mm256_permutevar8x32_ps(v, _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7))};
}
inline Groups operator*(const Groups& a, const Groups& b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
// Block blk's scale vector from a super-block's group floats: lanes 0-3 its first group's (the
// lanes idot sums its first 16 values in), lanes 4-7 its second's.
inline __m256i block_lanes_index(int blk) {
    const int k = 2 * (blk % 4);
    return _mm256_setr_epi32(k, k, k, k, k + 1, k + 1, k + 1, k + 1);
}
inline __m256 block_scale(const Groups& g, int blk) { return _mm256_permutevar8x32_ps(blk < 4 ? g.lo : g.hi, block_lanes_index(blk)); }
// The same lanes from 8 integers, one a group of blk's half of the super-block.
inline __m256i block_lanes(__m256i half, int blk) { return _mm256_permutevar8x32_epi32(half, block_lanes_index(blk)); }

// A super-block's scales and, where the type has them, minimums, as int8: all 16 bytes a group
// of 16 values each, or, for a type with a scale a block of 32 (Q::kBlockScales), bytes 0-7.
struct GroupBytes {
    __m128i scales, mins;
};

// The super-block loop of the K-quants (256 values, a scale a group of 16 or a block of 32): the
// scales (and minimums) turned to floats once a super-block and multiplied by each token's
// activation scales in vectors. A type with a scale a block of 32 gets each block of a token its
// one float from them by a broadcast load; one with a scale a group of 16 its two groups' floats
// by a lane permute. So a block's work per token is its integer dot, that, and a multiply-add.
// Q supplies Block, kBlockScales, kMins (x = d sc q - dmin m: the minimums come off through the
// sums of activations of each group, dc s16, or block, dcs), kOffset (q stored 32 high: 32 times
// each group's sum of activations comes off its integer, a quarter from each of its 4 lanes),
// prefetch, the scales (and minimums) as GroupBytes, and block blk's values.
template <class Q, int NT>
void k_quant_rows(const typename Q::Block* b, const Tokens& x, int64_t n, float* out) {
    RowDots<NT> r(x, n);
    __m256 mins[NT];
    for (int t = 0; t < NT; ++t) mins[t] = _mm256_setzero_ps();
    alignas(32) float block_at[NT][8];  // kBlockScales: each block's float, a token
    Groups group_at[NT];                // otherwise each group's
    for (int64_t i = 0; i < n / kQKK; ++i) {
        Q::prefetch(b + i);
        const GroupBytes g = Q::groups(b[i]);
        // The weight's floats, each group's (or, kBlockScales, each block's in the lo half).
        const Groups scale = scaled(g.scales, h2f(b[i].d));
        Groups min;
        if constexpr (Q::kMins) min = scaled(g.mins, h2f(b[i].dmin));
        __m256i off[NT][2];
        for (int t = 0; t < NT; ++t) {
            const float* dc = r.v[t].dc + 8 * i;
            const int32_t* s16 = r.v[t].s16 + 16 * i;
            if constexpr (Q::kBlockScales) {
                _mm256_store_ps(block_at[t], _mm256_mul_ps(scale.lo, _mm256_loadu_ps(dc)));
                if constexpr (Q::kMins) mins[t] = _mm256_fmadd_ps(min.lo, _mm256_loadu_ps(r.v[t].dcs + 8 * i), mins[t]);
                continue;
            }
            const Groups per_dc = per_group(dc);
            group_at[t] = scale * per_dc;
            if constexpr (Q::kOffset)  // a quarter of 32 s16 a lane, groups 0-7 and 8-15
                off[t][0] = _mm256_slli_epi32(load256(s16), 3), off[t][1] = _mm256_slli_epi32(load256(s16 + 8), 3);
            if constexpr (Q::kMins) {
                // Each group's minimum times the sum of its activations: dc * float(s16) a group.
                const Groups ms = per_dc * Groups{_mm256_cvtepi32_ps(load256(s16)), _mm256_cvtepi32_ps(load256(s16 + 8))};
                mins[t] = _mm256_fmadd_ps(min.lo, ms.lo, _mm256_fmadd_ps(min.hi, ms.hi, mins[t]));
            }
        }
        for (int blk = 0; blk < 8; ++blk) {
            const Halves w = Q::values(b[i], blk);
            for (int t = 0; t < NT; ++t) {
                __m256i dot = r.dot(t, w, 8 * i + blk);
                if constexpr (Q::kOffset) dot = _mm256_sub_epi32(dot, block_lanes(off[t][blk / 4], blk));
                if constexpr (Q::kBlockScales) r.add(t, dot, _mm256_broadcast_ss(&block_at[t][blk]));
                else r.add(t, dot, block_scale(group_at[t], blk));
            }
        }
    }
    for (int t = 0; t < NT; ++t) out[t] = r.sum(t) - hsum8(mins[t]);
}

template <class Q>
struct DotKQuant {
    static constexpr bool kWide = true;
    template <int NT>
    static void run(const void* wv, const Tokens& x, int64_t n, float* out) {
        k_quant_rows<Q, NT>(static_cast<const typename Q::Block*>(wv), x, n, out);
    }
};

}  // namespace
}  // namespace strata::cpu
