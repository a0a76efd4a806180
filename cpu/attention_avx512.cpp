// AVX-512 attention tile (attention_cpu.h). Built with -mavx512f for this file only; called only
// when the active path is avx512. Keys and values are read in the cache's type and converted
// 16 at a time: F16 with vcvtph2ps, BF16 by a 16-bit shift, Q8_0 as int8 times its block scale,
// Q4_0 as a block's low or high nibbles less 8 times its scale.
#include <immintrin.h>

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu/attention_cpu.h"
#include "cpu/exp_avx512.h"
#include "cpu/quant_ref.h"
#include "cpu/transpose_avx512.h"

namespace strata::cpu {
namespace {

// Values [col, col + 16) of a row, as floats. col is a multiple of 16, so for Q8_0 the 16
// values lie in one block of 32.
struct LoadF32 {
    static __m512 load16(const std::byte* row, int64_t col) { return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + col); }
};
struct LoadF16 {
    static __m512 load16(const std::byte* row, int64_t col) {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * col)));
    }
};
struct LoadBF16 {
    static __m512 load16(const std::byte* row, int64_t col) {
        const __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * col)));
        return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
    }
};
struct LoadQ8_0 {
    static __m512 load16(const std::byte* row, int64_t col) {
        const std::byte* b = row + (col / kQK) * sizeof(BlockQ8_0);
        f16_bits d;
        std::memcpy(&d, b, sizeof d);
        const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(BlockQ8_0, qs) + col % kQK));
        return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), _mm512_set1_ps(_cvtsh_ss(d)));
    }
};

// The first or second half of a block's 32 values: its low or high nibbles.
struct LoadQ4_0 {
    static __m512 load16(const std::byte* row, int64_t col) {
        const std::byte* b = row + (col / kQK) * sizeof(BlockQ4_0);
        f16_bits d;
        std::memcpy(&d, b, sizeof d);
        const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(BlockQ4_0, qs)));
        const __m128i nibbles = _mm_and_si128(col % kQK == 0 ? q : _mm_srli_epi16(q, 4), _mm_set1_epi8(0x0F));
        const __m512i v = _mm512_sub_epi32(_mm512_cvtepu8_epi32(nibbles), _mm512_set1_epi32(8));
        return _mm512_mul_ps(_mm512_cvtepi32_ps(v), _mm512_set1_ps(_cvtsh_ss(d)));
    }
};

// scores[m][j0..j0+16) for R query rows from the transposed key block kt[d][16].
template <int R>
inline void score_rows(const AttentionTile& t, const float* kt, int m0, int64_t j0, int64_t ld) {
    __m512 acc[R];
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) acc[i] = _mm512_setzero_ps();
    for (int32_t d = 0; d < t.head_dim; ++d) {
        const __m512 w = _mm512_load_ps(kt + 16 * d);
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(t.q[m0 + i][d]), w, acc[i]);
    }
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) _mm512_storeu_ps(t.scores + (m0 + i) * ld + j0, acc[i]);
}

// Keys this many ahead of the ones a loop reads are fetched into L2 as it goes: a decode row's
// keys and values come from DRAM in pages scattered through the cache, where the hardware's
// prefetchers see no stream, and each row is read once. (Into L1 the prefetches stall on the
// core's few outstanding misses: from DRAM a layer took 406 µs so against 305 into L2.)
constexpr int64_t kPrefetchKeys = 48;

// Fetches the bytes of columns [col, col + n) of rows [j, j + 16) below `end` (16 keys never
// cross a page).
inline void prefetch_rows(const AttentionTile& t, const std::byte* base, int64_t j, int64_t end, int64_t col, int32_t n) {
    if (j >= end) return;
    const int64_t be = traits(t.kv_type).block_elems;  // whole blocks of a block type
    const int64_t from = int64_t(row_bytes(t.kv_type, col / be * be));
    const int64_t bytes = int64_t(row_bytes(t.kv_type, (col + n + be - 1) / be * be)) - from;
    const std::byte* r = t.row(base, j) + from;
    for (int64_t i = 0; i < std::min<int64_t>(16, end - j); ++i, r += t.kv_stride)
        for (int64_t b = 0; b < bytes; b += 64) _mm_prefetch(reinterpret_cast<const char*>(r + b), _MM_HINT_T1);
}

// The 16 lanes of each of acc[0..15] summed: lane j of the result is acc[j]'s sum. Pairs of
// rows, then quads, then the 128-bit lanes, always in this order.
inline __m512 lane_sums16(const __m512 (&acc)[16]) {
    __m512 pair[8], quad[4];
    for (int i = 0; i < 8; ++i)
        pair[i] = _mm512_add_ps(_mm512_unpacklo_ps(acc[2 * i], acc[2 * i + 1]), _mm512_unpackhi_ps(acc[2 * i], acc[2 * i + 1]));
    for (int i = 0; i < 4; ++i) {
        const __m512d a = _mm512_castps_pd(pair[2 * i]), b = _mm512_castps_pd(pair[2 * i + 1]);
        quad[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
    }
    // quad[i]'s 128-bit lane L holds lane L's share of keys 4i .. 4i + 3.
    const __m512 h01 = _mm512_add_ps(_mm512_shuffle_f32x4(quad[0], quad[1], 0x88), _mm512_shuffle_f32x4(quad[0], quad[1], 0xDD));
    const __m512 h23 = _mm512_add_ps(_mm512_shuffle_f32x4(quad[2], quad[3], 0x88), _mm512_shuffle_f32x4(quad[2], quad[3], 0xDD));
    return _mm512_add_ps(_mm512_shuffle_f32x4(h01, h23, 0x88), _mm512_shuffle_f32x4(h01, h23, 0xDD));
}

// scores[m][j0..j0+16) for every row from the key block kf[16][head_dim] (floats, row-major):
// each key's products with a row summed over the head's chunks of 16 lane by lane, then the
// lanes (lane_sums16).
inline void score_rows_direct(const AttentionTile& t, const float* kf, int64_t j0, int64_t ld) {
    const int32_t chunks = t.head_dim / 16;
    for (int m = 0; m < t.m; ++m) {
        __m512 acc[16];
        for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
        for (int32_t c = 0; c < chunks; ++c) {
            const __m512 q = _mm512_loadu_ps(t.q[m] + 16 * c);
#pragma GCC unroll 16
            for (int i = 0; i < 16; ++i) acc[i] = _mm512_fmadd_ps(q, _mm512_load_ps(kf + i * t.head_dim + 16 * c), acc[i]);
        }
        _mm512_storeu_ps(t.scores + m * ld + j0, lane_sums16(acc));
    }
}

template <int R>
inline bool any_sees(const AttentionTile& t, int m0, int64_t j) {
    for (int i = 0; i < R; ++i)
        if (t.sees(m0 + i, j)) return true;
    return false;
}

// Output columns [16 c0, 16 (c0 + NC)) of rows m0..m0+R = P V over keys [lo, n): V row loaded
// once for R rows.
template <class L, int NC, int R>
inline void pv_rows(const AttentionTile& t, int m0, int64_t lo, int64_t n, int64_t ld, const float* inv, int c0) {
    __m512 acc[R][NC];
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
        for (int c = 0; c < NC; ++c) acc[i][c] = _mm512_setzero_ps();
    for (int64_t j0 = lo; j0 < n;) {  // one page at a time: rows kv_stride apart
        const std::byte* v = t.row(t.v, j0);
        const int64_t j1 = std::min(n, (j0 / t.block_size + 1) * t.block_size);
        for (int64_t j = j0; j < j1; ++j, v += t.kv_stride) {
            if (j % 16 == 0) prefetch_rows(t, t.v, j + kPrefetchKeys, n, t.v_col0 + 16 * c0, 16 * NC);
            // A tree's rows skip the keys none of them sees: those rows may be unwritten.
            if (t.tree && !any_sees<R>(t, m0, j)) continue;
            __m512 vv[NC];
#pragma GCC unroll 8
            for (int c = 0; c < NC; ++c) vv[c] = L::load16(v, t.v_col0 + 16 * (c0 + c));
#pragma GCC unroll 8
            for (int i = 0; i < R; ++i) {
                const __m512 p = _mm512_set1_ps(t.scores[(m0 + i) * ld + j]);
#pragma GCC unroll 8
                for (int c = 0; c < NC; ++c) acc[i][c] = _mm512_fmadd_ps(p, vv[c], acc[i][c]);
            }
        }
        j0 = j1;
    }
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
        const __m512 s = _mm512_set1_ps(inv[m0 + i]);
#pragma GCC unroll 8
        for (int c = 0; c < NC; ++c) _mm512_storeu_ps(t.out[m0 + i] + 16 * (c0 + c), _mm512_mul_ps(acc[i][c], s));
    }
}

// Scores of a row outside its keys are 0 (softmax below), so a group of rows runs over the
// union of their keys.
template <class L, int NC, int R>
void pv_group(const AttentionTile& t, int m0, int64_t ld, const float* inv, int c0) {
    int64_t lo = t.kv_first[m0], n = 0;
    for (int i = 0; i < R; ++i) lo = std::min(lo, t.kv_first[m0 + i]), n = std::max(n, t.n_kv[m0 + i]);
    pv_rows<L, NC, R>(t, m0, lo, n, ld, inv, c0);
}

// The rows from m0 on, fewer than R + 1: one group of them all, so that each V row is read
// once for them (decode's group of query heads, 3 or 4, is such a rest). A row's sums are the
// same in a group of any size.
template <class L, int NC, int R>
void pv_rest(const AttentionTile& t, int m0, int64_t ld, const float* inv, int c0) {
    if constexpr (R >= 1) {
        if (t.m - m0 == R) return pv_group<L, NC, R>(t, m0, ld, inv, c0);
        pv_rest<L, NC, R - 1>(t, m0, ld, inv, c0);
    }
}

template <class L, int NC>
void pv_all(const AttentionTile& t, int64_t ld, const float* inv, int c0 = 0) {
    constexpr int R = NC <= 4 ? 24 / NC : 2;  // R * NC accumulators stay in registers
    int m0 = 0;
    for (; m0 + R <= t.m; m0 += R) pv_group<L, NC, R>(t, m0, ld, inv, c0);
    pv_rest<L, NC, R - 1>(t, m0, ld, inv, c0);
}

// Lanes of keys [j, j + 16) inside [lo, n).
inline __mmask16 key_lanes(int64_t j, int64_t lo, int64_t n) {
    uint32_t k = n - j >= 16 ? 0xFFFFu : (1u << (n - j)) - 1;
    if (lo > j) k &= ~((1u << std::min<int64_t>(16, lo - j)) - 1);
    return static_cast<__mmask16>(k);
}

// Adds to `sum` the exponentials e[j] (j >= from, a multiple of 16 at or below the tree's base)
// of tree row m as the chain of its ancestors holds them: the key at slot j at its position
// key_pos, the lanes filled 16 positions at a time. A branch's ancestors lie at slots apart
// from their positions; summed by slot, its lanes would add in another order than its
// branch's decode steps do.
inline __m512 tree_sum(const AttentionTile& t, int m, const float* e, int64_t from, __m512 sum) {
    const AttentionTree& tree = *t.tree;
    const int64_t end = tree.pos[t.tokens[m]] + 1;  // the chain's keys end at the row's position
    for (int64_t p0 = from; p0 < end; p0 += 16) {
        alignas(64) float chain[16] = {};
        for (int64_t p = p0; p < std::min(p0 + 16, tree.base); ++p) chain[p - p0] = e[p];
        for (int64_t j = tree.base; j < t.n_kv[m]; ++j) {
            const int64_t at = tree.key_pos[j - tree.base] - p0;
            if (at >= 0 && at < 16 && t.sees(m, j)) chain[at] = e[j];
        }
        sum = _mm512_add_ps(sum, _mm512_load_ps(chain));
    }
    return sum;
}

template <class L>
void tile(const AttentionTile& t) {
    const int32_t hd = t.head_dim;
    const int64_t ld = t.n_kv_max + 16;
    alignas(64) float kt[kMaxSimdHeadDim * 16];
    // 1. Scores, 16 keys at a time: the key block is converted to float and transposed so that
    // each head dimension is a vector over the 16 keys, and each query row needs one broadcast
    // FMA per dimension.
    for (int64_t j0 = t.j_begin; j0 < t.n_kv_max; j0 += 16) {
        const int nb = static_cast<int>(std::min<int64_t>(16, t.n_kv_max - j0));
        const std::byte* kb = t.row(t.k, j0);  // 16 keys never cross a page
        prefetch_rows(t, t.k, j0 + kPrefetchKeys, t.n_kv_max, t.col0, hd);
        if (t.direct_scores) {  // the block as floats, one key a row
            for (int i = 0; i < 16; ++i)
                for (int32_t c = 0; c < hd / 16; ++c)
                    _mm512_store_ps(kt + i * hd + 16 * c, i < nb ? L::load16(kb + i * t.kv_stride, t.col0 + 16 * c) : _mm512_setzero_ps());
            score_rows_direct(t, kt, j0, ld);
            continue;
        }
        for (int32_t c = 0; c < hd / 16; ++c) {
            __m512 r[16];
            for (int i = 0; i < 16; ++i) r[i] = i < nb ? L::load16(kb + i * t.kv_stride, t.col0 + 16 * c) : _mm512_setzero_ps();
            transpose16(r);
            for (int i = 0; i < 16; ++i) _mm512_store_ps(kt + (16 * c + i) * 16, r[i]);
        }
        int m0 = 0;
        for (; m0 + 8 <= t.m; m0 += 8) score_rows<8>(t, kt, m0, j0, ld);
        for (; m0 + 4 <= t.m; m0 += 4) score_rows<4>(t, kt, m0, j0, ld);
        for (; m0 < t.m; ++m0) score_rows<1>(t, kt, m0, j0, ld);
    }
    // 2. Softmax of each row over its own keys; the keys outside them get weight 0.
    float inv[512];
    float* invp = t.m <= 512 ? inv : nullptr;
    for (int m = 0; m < t.m; ++m) {
        float* s = t.scores + m * ld;
        const int64_t lo = t.kv_first[m], n = t.n_kv[m];
        if (t.softcap > 0) softcap_scores(s + lo, n - lo, t.softcap);
        __m512 mx = _mm512_set1_ps(t.sinks ? t.sinks[m] : -INFINITY);  // a sink is one more score
        auto lanes = [&](int64_t j) { return static_cast<__mmask16>(key_lanes(j, lo, n) & t.tree_lanes(m, j)); };
        for (int64_t j = t.j_begin; j < n; j += 16) mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(mx, lanes(j), s + j));
        const float row_max = _mm512_reduce_max_ps(mx);
        const __m512 vmax = _mm512_set1_ps(row_max);
        // A tree row's keys from the vector holding the tree's first slot on are summed apart,
        // at their positions (tree_sum).
        // (From j_begin at least: the window leaves the keys before it out, and their scores unwritten.)
        const int64_t summed = t.tree ? std::min(n, std::max(t.j_begin, t.tree->base / 16 * 16)) : n;
        __m512 sum = _mm512_setzero_ps();
        for (int64_t j = t.j_begin; j < n; j += 16) {
            const __m512 e = _mm512_maskz_mov_ps(lanes(j), exp512(_mm512_sub_ps(_mm512_loadu_ps(s + j), vmax)));
            _mm512_storeu_ps(s + j, e);
            if (j < summed) sum = _mm512_add_ps(sum, e);
        }
        if (summed < n) sum = tree_sum(t, m, s, summed, sum);
        for (int64_t j = (n + 15) / 16 * 16; j < t.n_kv_max; j += 16) _mm512_storeu_ps(s + j, _mm512_setzero_ps());
        const float sink = t.sinks ? std::exp(t.sinks[m] - row_max) : 0.0f;
        const float row_sum = _mm512_reduce_add_ps(sum) + sink;
        if (invp) invp[m] = 1.0f / row_sum;
        if (t.partial) t.out[m][t.v_dim] = row_max, t.out[m][t.v_dim + 1] = row_sum;
    }
    // 3. Outputs: the common widths in one pass over V, others (MLA's 512) in passes of 128 values.
    if (!invp) return;  // not reached: tiles have at most max(32, group) rows
    const int nc = t.v_dim / 16;
    switch (nc) {
        case 4: pv_all<L, 4>(t, ld, invp); break;
        case 8: pv_all<L, 8>(t, ld, invp); break;
        case 2: pv_all<L, 2>(t, ld, invp); break;
        case 6: pv_all<L, 6>(t, ld, invp); break;
        default: {
            int c0 = 0;
            for (; c0 + 8 <= nc; c0 += 8) pv_all<L, 8>(t, ld, invp, c0);
            for (; c0 + 4 <= nc; c0 += 4) pv_all<L, 4>(t, ld, invp, c0);
            for (; c0 < nc; ++c0) pv_all<L, 1>(t, ld, invp, c0);
        }
    }
}

}  // namespace

void attention_tile_avx512(const AttentionTile& t) {
    switch (t.kv_type) {
        case DType::F16: return tile<LoadF16>(t);
        case DType::BF16: return tile<LoadBF16>(t);
        case DType::Q8_0: return tile<LoadQ8_0>(t);
        case DType::Q4_0: return tile<LoadQ4_0>(t);
        default: return tile<LoadF32>(t);
    }
}

}  // namespace strata::cpu
