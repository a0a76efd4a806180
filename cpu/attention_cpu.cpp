#include "cpu/attention_cpu.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "core/kernel_shapes.h"
#include "cpu/cpu_features.h"
#include "cpu/gemm_x86.h"
#include "cpu/kv_format.h"
#include "cpu/quant_ref.h"
#include "cpu/thread_pool.h"

namespace strata::cpu {

namespace {
// n values of row j of k (v) from column col0, as floats: in place for F32, else converted into buf.
const float* head_values(const AttentionTile& t, const std::byte* base, int64_t j, int64_t col0, int32_t n, float* buf) {
    const std::byte* r = t.row(base, j);
    if (t.kv_type == DType::F32) return reinterpret_cast<const float*>(r) + col0;
    load_kv_values(t.kv_type, r, col0, buf, n);
    return buf;
}
}  // namespace

// Each key and value row is converted once for all the tile's rows that see it; each row's
// arithmetic is the same in any tile (dot products, exponentials and sums in key order).
void attention_tile_ref(const AttentionTile& t) {
    const int64_t ld = t.n_kv_max + 16;
    std::vector<float> buf(t.kv_type == DType::F32 ? 0 : t.head_dim), inv(t.m);
    const int64_t n_max = *std::max_element(t.n_kv, t.n_kv + t.m);
    auto sees = [&](int m, int64_t j) { return t.sees(m, j); };
    for (int64_t j = t.j_begin; j < n_max; ++j) {
        const float* k = head_values(t, t.k, j, t.col0, t.head_dim, buf.data());
        for (int m = 0; m < t.m; ++m) {
            if (!sees(m, j)) continue;
            float dot = 0;
            for (int32_t d = 0; d < t.head_dim; ++d) dot += t.q[m][d] * k[d];
            t.scores[m * ld + j] = dot;
        }
    }
    for (int m = 0; m < t.m; ++m) {
        float* s = t.scores + m * ld;
        const int64_t lo = t.kv_first[m], n = t.n_kv[m];
        if (t.softcap > 0) softcap_scores(s + lo, n - lo, t.softcap);
        float mx = t.sinks ? t.sinks[m] : -INFINITY, sum = 0;
        for (int64_t j = lo; j < n; ++j)
            if (sees(m, j)) mx = std::max(mx, s[j]);
        for (int64_t j = lo; j < n; ++j)
            if (sees(m, j)) sum += (s[j] = std::exp(s[j] - mx));
        if (t.sinks) sum += std::exp(t.sinks[m] - mx);
        inv[m] = 1.0f / sum;
        std::fill_n(t.out[m], t.v_dim, 0.0f);
    }
    for (int64_t j = t.j_begin; j < n_max; ++j) {
        const float* v = head_values(t, t.v, j, t.v_col0, t.v_dim, buf.data());
        for (int m = 0; m < t.m; ++m) {
            if (!sees(m, j)) continue;
            const float w = t.scores[m * ld + j] * inv[m];
            float* o = t.out[m];
            for (int32_t d = 0; d < t.v_dim; ++d) o[d] += w * v[d];
        }
    }
}

void softcap_scores(float* s, int64_t n, float cap) {
    const float inv = 1.0f / cap;
    for (int64_t j = 0; j < n; ++j) s[j] = cap * std::tanh(s[j] * inv);
}

void attention(const AttentionArgs& a) {
    if (!is_kv_type(a.kv_type))
        throw UsageError(fmt::format("{} is not a KV cache type", dtype_name(a.kv_type)),
                         fmt::format("use one of {}", kKvTypeList));
    const int32_t v_dim = a.v_dim();
    if (v_dim > a.head_dim)
        throw UsageError(fmt::format("value heads of {} values are wider than key heads of {}", v_dim, a.head_dim),
                         "only narrower value heads are supported (MLA: the latent part of the key rows)");
    const int32_t group = a.n_head / a.n_head_kv;
    const float scale = a.scale > 0 ? a.scale : 1.0f / std::sqrt(static_cast<float>(a.head_dim));
    const int64_t q_stride = static_cast<int64_t>(a.n_head) * a.head_dim, o_stride = static_cast<int64_t>(a.n_head) * v_dim;
    // Query rows per tile: all `group` heads of a KV head for `tok` tokens, at most kAttentionTileRows.
    const int64_t tok = std::max<int64_t>(1, kAttentionTileRows / group);
    const int64_t n_tiles_t = (a.n_tokens + tok - 1) / tok;
    const bool simd = active_path() == CpuPath::Avx512 && a.head_dim % 16 == 0 && v_dim % 16 == 0 &&
                      a.head_dim <= kMaxSimdHeadDim && group <= 512;
    STRATA_ASSERT(!a.block_table || (a.block_size > 0 && a.block_size % 16 == 0));
    STRATA_ASSERT(traits(a.kv_type).block_elems == 1 || (static_cast<int64_t>(a.n_head_kv) * a.head_dim) % kQK == 0);

    parallel_for(a.n_head_kv * n_tiles_t, [&](int64_t task) {
        const int32_t hk = static_cast<int32_t>(task % a.n_head_kv);
        const int64_t t0 = (task / a.n_head_kv) * tok, t1 = std::min(a.n_tokens, t0 + tok);
        const int m = static_cast<int>((t1 - t0) * group);
        const AttentionTree* tree = a.tree;
        // A tree's rows end at their slots, in no particular order.
        int64_t n_kv_max = a.pos0 + t1;
        if (tree) n_kv_max = *std::max_element(tree->slot + t0, tree->slot + t1) + 1;
        // Scratch: the scaled query rows, row pointers, key counts and tokens, then the scores.
        auto align = [](size_t n) { return (n + 63) & ~size_t{63}; };
        const size_t q_bytes = align(sizeof(float) * m * a.head_dim), p_bytes = align(sizeof(void*) * m),
                     n_bytes = align(sizeof(int64_t) * m), s_bytes = align(sizeof(float) * m);
        uint8_t* buf = thread_scratch(3, q_bytes + 2 * p_bytes + 3 * n_bytes + s_bytes + sizeof(float) * m * (n_kv_max + 16));
        auto* qs = reinterpret_cast<float*>(buf);
        auto** qrows = reinterpret_cast<const float**>(buf + q_bytes);
        auto** orows = reinterpret_cast<float**>(buf + q_bytes + p_bytes);
        auto* nrows = reinterpret_cast<int64_t*>(buf + q_bytes + 2 * p_bytes);
        auto* firsts = reinterpret_cast<int64_t*>(buf + q_bytes + 2 * p_bytes + n_bytes);
        auto* tokens = reinterpret_cast<int64_t*>(buf + q_bytes + 2 * p_bytes + 2 * n_bytes);
        auto* sinks = reinterpret_cast<float*>(buf + q_bytes + 2 * p_bytes + 3 * n_bytes);
        auto* scores = reinterpret_cast<float*>(buf + q_bytes + 2 * p_bytes + 3 * n_bytes + s_bytes);
        int r = 0;
        for (int64_t t = t0; t < t1; ++t)
            for (int32_t g = 0; g < group; ++g, ++r) {
                const int32_t h = hk * group + g;
                const float* src = a.q + t * q_stride + static_cast<int64_t>(h) * a.head_dim;
                float* dst = qs + static_cast<int64_t>(r) * a.head_dim;
                for (int32_t d = 0; d < a.head_dim; ++d) dst[d] = src[d] * scale;
                qrows[r] = dst;
                orows[r] = a.out + t * o_stride + static_cast<int64_t>(h) * v_dim;
                nrows[r] = tree ? tree->slot[t] + 1 : a.pos0 + t + 1;
                // A window counts back from the row's position (a tree's mask drops the nodes before it).
                const int64_t pos = tree ? tree->pos[t] : a.pos0 + t;
                firsts[r] = a.window > 0 ? std::max<int64_t>(0, pos + 1 - a.window) : 0;
                tokens[r] = t;
                if (a.sinks) sinks[r] = a.sinks[h];
            }
        AttentionTile tile{qrows, orows, nrows, firsts, m, n_kv_max};
        tile.k = static_cast<const std::byte*>(a.k);
        tile.v = static_cast<const std::byte*>(a.v);
        tile.col0 = static_cast<int64_t>(hk) * a.head_dim;
        tile.v_col0 = static_cast<int64_t>(hk) * v_dim;
        tile.kv_stride = a.kv_stride;
        tile.kv_type = a.kv_type;
        tile.head_dim = a.head_dim;
        tile.v_dim = v_dim;
        tile.sinks = a.sinks ? sinks : nullptr;
        tile.scores = scores;
        // Causal rows come in position order: the first sees the earliest key.
        tile.j_begin = (tree ? *std::min_element(firsts, firsts + m) : firsts[0]) / 16 * 16;
        tile.tree = tree;
        tile.tokens = tokens;
        tile.softcap = a.softcap;
        tile.blocks = a.block_table;
        tile.block_size = a.block_table ? a.block_size : (n_kv_max + 15) / 16 * 16;
        tile.block_stride = a.block_stride;
        if (simd) attention_tile_avx512(tile);
        else attention_tile_ref(tile);
    });
}

}  // namespace strata::cpu
