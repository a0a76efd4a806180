#pragma once
// Internal: the attention tile of the plain kernels (attention_cpu.h's AttentionTile), with its
// two inner loops given by `Ops`: Ops::dot(q, k, n), a query row against a key row, and
// Ops::axpy(w, v, o, n), o += w * v. The reference instantiates it in plain C++
// (attention_cpu.cpp), the AVX2 path with 8-lane FMA (attention_avx2.cpp, built with its flags).
// Each key and value row is converted once for all the tile's rows that see it; each row's
// arithmetic is the same in any tile (dot products, exponentials and sums in key order).
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/attention_cpu.h"
#include "cpu/kv_format.h"

// In an unnamed namespace: each kernel's file keeps its own copy, built with its own flags (a
// shared inline copy could be the AVX2 file's, run on a CPU without AVX2).
namespace strata::cpu::detail {
namespace {

// n values of row j of k (v) from column col0, as floats: in place for F32, else converted into buf.
const float* head_values(const AttentionTile& t, const std::byte* base, int64_t j, int64_t col0, int32_t n,
                                float* buf) {
    const std::byte* r = t.row(base, j);
    if (t.kv_type == DType::F32) return reinterpret_cast<const float*>(r) + col0;
    load_kv_values(t.kv_type, r, col0, buf, n);
    return buf;
}

template <class Ops>
void attention_tile_loop(const AttentionTile& t) {
    const int64_t ld = t.n_kv_max + 16;
    std::vector<float> buf(t.kv_type == DType::F32 ? 0 : t.head_dim), inv(t.m);
    const int64_t n_max = *std::max_element(t.n_kv, t.n_kv + t.m);
    auto sees = [&](int m, int64_t j) { return t.sees(m, j); };
    for (int64_t j = t.j_begin; j < n_max; ++j) {
        const float* k = head_values(t, t.k, j, t.col0, t.head_dim, buf.data());
        for (int m = 0; m < t.m; ++m)
            if (sees(m, j)) t.scores[m * ld + j] = Ops::dot(t.q[m], k, t.head_dim);
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
        if (t.partial) t.out[m][t.v_dim] = mx, t.out[m][t.v_dim + 1] = sum;
    }
    for (int64_t j = t.j_begin; j < n_max; ++j) {
        const float* v = head_values(t, t.v, j, t.v_col0, t.v_dim, buf.data());
        for (int m = 0; m < t.m; ++m)
            if (sees(m, j)) Ops::axpy(t.scores[m * ld + j] * inv[m], v, t.out[m], t.v_dim);
    }
}

}  // namespace
}  // namespace strata::cpu::detail
