#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "cpu/attention_cpu.h"
#include "cpu/norm_rope_act.h"

using namespace strata::cpu;

namespace {
std::vector<float> random_vec(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}
double dot(const float* a, const float* b, int n) {
    double s = 0;
    for (int i = 0; i < n; ++i) s += double(a[i]) * b[i];
    return s;
}
}  // namespace

TEST_CASE("rms_norm gives unit mean square before the weight", "[unit][cpu]") {
    auto x = random_vec(100, 1);
    std::vector<float> w(100, 1.0f), y(100);
    rms_norm(x.data(), w.data(), y.data(), 100, 1e-6f);
    CHECK(dot(y.data(), y.data(), 100) / 100 == Approx(1.0).epsilon(1e-4));
}

TEST_CASE("rope: rotated q.k depends only on the position difference", "[unit][cpu]") {
    for (bool neox : {false, true}) {
        RopeParams p{16, 12, 10000.0f, 1.0f, neox, nullptr};  // 12 of 16 dims rotated
        auto q0 = random_vec(16, 2), k0 = random_vec(16, 3);
        auto score = [&](int pq, int pk) {
            auto q = q0, k = k0;
            rope(q.data(), 1, pq, p);
            rope(k.data(), 1, pk, p);
            return dot(q.data(), k.data(), 16);
        };
        INFO("neox " << neox);
        CHECK(score(10, 7) == Approx(score(103, 100)).epsilon(1e-4));
        CHECK(score(10, 7) != Approx(score(10, 9)).epsilon(1e-4));
        auto q = q0;
        rope(q.data(), 1, 0, p);
        CHECK(q == q0);  // position 0 is the identity
        rope(q.data(), 1, 5, p);
        CHECK(dot(q.data(), q.data(), 16) == Approx(dot(q0.data(), q0.data(), 16)).epsilon(1e-5));
        CHECK(q[15] == q0[15]);  // dims past n_rot are untouched
    }
}

TEST_CASE("rope normal mode rotates adjacent pairs by pos * base^(-2i/n)", "[unit][cpu]") {
    RopeParams p{4, 4, 100.0f, 1.0f, false, nullptr};
    std::vector<float> x{1, 0, 1, 0};
    rope(x.data(), 1, 3, p);
    CHECK(x[0] == Approx(std::cos(3.0)));
    CHECK(x[1] == Approx(std::sin(3.0)));
    CHECK(x[2] == Approx(std::cos(3.0 / 10)));  // 100^(-2/4) = 1/10
    CHECK(x[3] == Approx(std::sin(3.0 / 10)));
}

TEST_CASE("attention matches a naive causal GQA implementation", "[unit][cpu]") {
    const int n_head = 6, n_head_kv = 2, hd = 8, n_tokens = 5, pos0 = 3, n_kv = pos0 + n_tokens;
    const int kv_stride = n_head_kv * hd + 4;  // padded rows
    auto q = random_vec(n_tokens * n_head * hd, 4), k = random_vec(n_kv * kv_stride, 5), v = random_vec(n_kv * kv_stride, 6);
    std::vector<float> out(q.size());
    AttentionArgs a{q.data(), k.data(), v.data(), out.data(), n_tokens, pos0, n_head, n_head_kv, hd, kv_stride};
    attention(a);
    for (int t = 0; t < n_tokens; ++t)
        for (int h = 0; h < n_head; ++h) {
            const int kvh = h / (n_head / n_head_kv);
            std::vector<double> w;
            double mx = -1e30, sum = 0;
            for (int j = 0; j <= pos0 + t; ++j) {
                w.push_back(dot(&q[(t * n_head + h) * hd], &k[j * kv_stride + kvh * hd], hd) / std::sqrt(double(hd)));
                mx = std::max(mx, w.back());
            }
            for (auto& x : w) sum += (x = std::exp(x - mx));
            for (int d = 0; d < hd; ++d) {
                double o = 0;
                for (size_t j = 0; j < w.size(); ++j) o += w[j] / sum * v[j * kv_stride + kvh * hd + d];
                CHECK(out[(t * n_head + h) * hd + d] == Approx(o).margin(1e-5));
            }
        }
}
