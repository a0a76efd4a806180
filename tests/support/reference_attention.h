#pragma once
// Causal grouped-query attention in double, the reference the attention kernels are checked
// against: query rows q (n_tokens x n_head x hd) at positions pos0..., each against positions
// 0..its own; key(j, i) and value(j, i) give value i of position j's K and V rows (n_head_kv x hd).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace strata::test {

template <class Key, class Value>
std::vector<double> attention_f64(const std::vector<float>& q, int n_tokens, int pos0, int n_head, int n_head_kv, int hd,
                                  Key key, Value value) {
    std::vector<double> out(q.size());
    for (int t = 0; t < n_tokens; ++t)
        for (int h = 0; h < n_head; ++h) {
            const int c0 = h / (n_head / n_head_kv) * hd;
            const float* qr = &q[(size_t(t) * n_head + h) * hd];
            std::vector<double> w(pos0 + t + 1);
            double mx = -INFINITY, sum = 0;
            for (size_t j = 0; j < w.size(); ++j) {
                double s = 0;
                for (int d = 0; d < hd; ++d) s += double(qr[d]) * key(int(j), c0 + d);
                mx = std::max(mx, w[j] = s / std::sqrt(double(hd)));
            }
            for (auto& x : w) sum += (x = std::exp(x - mx));
            for (int d = 0; d < hd; ++d) {
                double o = 0;
                for (size_t j = 0; j < w.size(); ++j) o += w[j] / sum * value(int(j), c0 + d);
                out[(size_t(t) * n_head + h) * hd + d] = o;
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
