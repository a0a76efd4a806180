#pragma once
// Internal: the attention tile of the plain kernels (attention_cpu.h's AttentionTile), its inner
// loops given by `Ops`:
//   Ops::scores(q, m, keys, nb, hd, s, ld): s[i * ld + k] = q[i] . keys[k] for m rows, nb keys;
//   Ops::max(s, n): the largest of n scores (-inf for none);
//   Ops::exp(s, n, mx): each s[j] = e^(s[j] - mx), the same function for every j;
//   Ops::sum(e, n): their sum, in an order that depends on n alone;
//   Ops::weigh(s, scale, values, nb, o, n): o += s[k] * scale * values[k] over nb keys in order.
// The reference instantiates it in plain C++ (attention_cpu.cpp), the AVX2 path with 8 lanes
// (attention_avx2.cpp, built with its flags). Keys and values are converted a block at a time
// for all the tile's rows; every score of a row is computed, and only the keys it sees are
// weighed. Each row's arithmetic is the same in any tile and for a draft tree's node as for its
// branch's decode step (the sum runs over the node's keys by position).
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/attention_cpu.h"
#include "cpu/kv_format.h"

// In an unnamed namespace: each kernel's file keeps its own copy, built with its own flags (a
// shared inline copy could be the AVX2 file's, run on a CPU without AVX2).
namespace strata::cpu::detail {
namespace {

// Keys a block.
constexpr int kKeyBlock = 32;

// Rows [j0, j0 + nb) of k (v) from column col0, n values each, as floats: in place for F32,
// else converted into buf (nb x n).
void block_values(const AttentionTile& t, const std::byte* base, int64_t j0, int nb, int64_t col0, int32_t n, float* buf,
                  const float* rows[kKeyBlock]) {
    for (int i = 0; i < nb; ++i) {
        const std::byte* r = t.row(base, j0 + i);
        if (t.kv_type == DType::F32) {
            rows[i] = reinterpret_cast<const float*>(r) + col0;
        } else {
            load_kv_values(t.kv_type, r, col0, buf + int64_t(i) * n, n);
            rows[i] = buf + int64_t(i) * n;
        }
    }
}

// Row m's exponentials e[j] over [lo, n) summed as its branch's decode step sums them: by
// position, the tree's keys (slots from its base on) at theirs.
template <class Ops>
float tree_row_sum(const AttentionTile& t, int m, const float* e, int64_t lo, int64_t n, std::vector<float>& chain) {
    const AttentionTree& tree = *t.tree;
    const int64_t end = tree.pos[t.tokens[m]] + 1;
    chain.assign(size_t(std::max<int64_t>(0, end - lo)), 0.0f);
    for (int64_t j = lo; j < std::min(n, tree.base); ++j) chain[size_t(j - lo)] = e[j];
    for (int64_t j = std::max(lo, tree.base); j < n; ++j) {
        const int64_t p = tree.key_pos[j - tree.base];
        if (t.sees(m, j) && p >= lo && p < end) chain[size_t(p - lo)] = e[j];
    }
    return Ops::sum(chain.data(), int64_t(chain.size()));
}

template <class Ops>
void attention_tile_loop(const AttentionTile& t) {
    const int64_t ld = t.n_kv_max + 16;
    const int64_t n_max = *std::max_element(t.n_kv, t.n_kv + t.m);
    std::vector<float> buf(t.kv_type == DType::F32 ? 0 : size_t(kKeyBlock) * std::max(t.head_dim, t.v_dim)), inv(size_t(t.m));
    std::vector<float> chain;
    const float* rows[kKeyBlock];
    for (int64_t j0 = t.j_begin; j0 < n_max; j0 += kKeyBlock) {
        const int nb = int(std::min<int64_t>(kKeyBlock, n_max - j0));
        block_values(t, t.k, j0, nb, t.col0, t.head_dim, buf.data(), rows);
        Ops::scores(t.q, t.m, rows, nb, t.head_dim, t.scores + j0, ld);
    }
    for (int m = 0; m < t.m; ++m) {
        float* s = t.scores + m * ld;
        const int64_t lo = t.kv_first[m], n = t.n_kv[m];
        if (t.softcap > 0) softcap_scores(s + lo, n - lo, t.softcap);
        // Every key below a tree's (all of them without one) is seen.
        const int64_t below = t.tree ? std::min(n, std::max(lo, t.tree->base)) : n;
        float mx = std::max(t.sinks ? t.sinks[m] : -INFINITY, Ops::max(s + lo, below - lo)), sum = 0;
        for (int64_t j = below; j < n; ++j) {
            if (t.sees(m, j)) mx = std::max(mx, s[j]);
            else s[j] = -INFINITY;  // e^-inf: 0
        }
        if (mx != -INFINITY) {
            Ops::exp(s + lo, n - lo, mx);
            sum = t.tree && n > t.tree->base ? tree_row_sum<Ops>(t, m, s, lo, n, chain) : Ops::sum(s + lo, n - lo);
        } else {
            for (int64_t j = lo; j < n; ++j) s[j] = 0.0f;  // it sees no key: its output stays 0
        }
        if (t.sinks) sum += std::exp(t.sinks[m] - mx);
        inv[size_t(m)] = sum > 0 ? 1.0f / sum : 0.0f;
        std::fill_n(t.out[m], t.v_dim, 0.0f);
        if (t.partial) t.out[m][t.v_dim] = mx, t.out[m][t.v_dim + 1] = sum;
    }
    for (int64_t j0 = t.j_begin; j0 < n_max; j0 += kKeyBlock) {
        const int nb = int(std::min<int64_t>(kKeyBlock, n_max - j0));
        block_values(t, t.v, j0, nb, t.v_col0, t.v_dim, buf.data(), rows);
        for (int m = 0; m < t.m; ++m) {
            const int64_t from = std::max(j0, t.kv_first[m]), to = std::min(j0 + nb, t.n_kv[m]);
            const auto weigh = [&](int64_t a, int64_t b) {  // keys [a, b), in order
                Ops::weigh(t.scores + m * ld + a, inv[size_t(m)], rows + (a - j0), int(b - a), t.out[m], t.v_dim);
            };
            if (!t.tree || to <= t.tree->base) {
                if (from < to) weigh(from, to);
                continue;
            }
            // A tree row weighs the runs of keys it sees: another branch's may be unwritten.
            for (int64_t j = from; j < to;) {
                int64_t end = j;
                while (end < to && t.sees(m, end)) ++end;
                if (end > j) weigh(j, end);
                j = std::max(end, j + 1);
            }
        }
    }
}

}  // namespace
}  // namespace strata::cpu::detail
