#pragma once
// Causal grouped-query attention in double, the reference the attention kernels are checked
// against: query rows q (n_tokens x n_head x hd) at positions pos0..., each against positions
// 0..its own (or the last `window` of them); key(j, i) and value(j, i) give value i of position
// j's K and V rows (n_head_kv x hd). Scores are scaled by 1/sqrt(hd) (or `scale`) and, with a
// soft cap c, mapped to c tanh(s / c). With `sinks`, head h's softmax has one more logit, sinks[h],
// in its denominator; with v_dim, value heads are v_dim wide (head h's values from column
// (its KV head) * v_dim of a V row) and so are the outputs (n_tokens x n_head x v_dim).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace strata::test {

struct AttentionVariant {
    int window = 0;
    double scale = 0;
    double softcap = 0;
    const float* sinks = nullptr;
    int v_dim = 0;
};

template <class Key, class Value>
std::vector<double> attention_f64(const std::vector<float>& q, int n_tokens, int pos0, int n_head, int n_head_kv, int hd,
                                  Key key, Value value, AttentionVariant var = {}) {
    const int vd = var.v_dim > 0 ? var.v_dim : hd;
    std::vector<double> out(size_t(n_tokens) * n_head * vd);
    for (int t = 0; t < n_tokens; ++t)
        for (int h = 0; h < n_head; ++h) {
            const int c0 = h / (n_head / n_head_kv) * hd, v0 = h / (n_head / n_head_kv) * vd;
            const float* qr = &q[(size_t(t) * n_head + h) * hd];
            const int n = pos0 + t + 1, lo = var.window > 0 ? std::max(0, n - var.window) : 0;
            std::vector<double> w(n, 0.0);
            double mx = -INFINITY, sum = 0;
            for (int j = lo; j < n; ++j) {
                double s = 0;
                for (int d = 0; d < hd; ++d) s += double(qr[d]) * key(j, c0 + d);
                s *= var.scale > 0 ? var.scale : 1.0 / std::sqrt(double(hd));
                if (var.softcap > 0) s = var.softcap * std::tanh(s / var.softcap);
                mx = std::max(mx, w[j] = s);
            }
            if (var.sinks) mx = std::max(mx, double(var.sinks[h]));
            for (int j = lo; j < n; ++j) sum += (w[j] = std::exp(w[j] - mx));
            if (var.sinks) sum += std::exp(double(var.sinks[h]) - mx);
            for (int d = 0; d < vd; ++d) {
                double o = 0;
                for (int j = lo; j < n; ++j) o += w[j] / sum * value(j, v0 + d);
                out[(size_t(t) * n_head + h) * vd + d] = o;
            }
        }
    return out;
}

// The (j, i) accessor of rows given as row(j) -> const float*.
template <class Row>
auto by_rows(Row row) {
    return [row](int j, int i) { return double(row(j)[i]); };
}

}  // namespace strata::test
