#include <catch2/catch.hpp>

#include <cmath>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "cpu/attention_cpu.h"
#include "cpu/cpu_features.h"
#include "cpu/norm_rope_act.h"
#include "cpu/thread_pool.h"
#include "tests/support/fixtures.h"
#include "tests/support/random_values.h"
#include "tests/support/reference_attention.h"

using namespace strata::cpu;
using strata::test::attention_f64;
using strata::test::by_rows;
using strata::test::normal_floats;

namespace {
double dot(const float* a, const float* b, int n) {
    double s = 0;
    for (int i = 0; i < n; ++i) s += double(a[i]) * b[i];
    return s;
}

// The values of a contiguous K or V matrix whose rows are `stride` floats apart.
auto rows(const std::vector<float>& m, int stride) {
    return by_rows([&m, stride](int j) { return &m[size_t(j) * stride]; });
}
}  // namespace

TEST_CASE("rms_norm gives unit mean square before the weight", "[unit][cpu]") {
    auto x = normal_floats(100, 1);
    std::vector<float> w(100, 1.0f), y(100);
    rms_norm(x.data(), w.data(), y.data(), 100, 1e-6f);
    CHECK(dot(y.data(), y.data(), 100) / 100 == Approx(1.0).epsilon(1e-4));
}

TEST_CASE("rope: rotated q.k depends only on the position difference", "[unit][cpu]") {
    for (bool neox : {false, true}) {
        RopeParams p{16, 12, 10000.0f, 1.0f, neox, nullptr};  // 12 of 16 dims rotated
        auto q0 = normal_floats(16, 2), k0 = normal_floats(16, 3);
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

TEST_CASE("rope: YaRN matches numpy's rotation by blended frequencies (tests/fixtures/rope/yarn.json)", "[unit][cpu]") {
    const auto bytes = strata::test::read_fixture_bytes("rope/yarn.json");
    const auto fixture = nlohmann::json::parse(bytes.begin(), bytes.end());
    for (const auto& c : fixture["cases"]) {
        const int head_dim = c["head_dim"], n_rot = c["n_rot"];
        INFO("case " << c["name"].get<std::string>());
        const float base = c["base"], factor = c["factor"], magnitude = c["magnitude"];
        const YarnRamp ramp = yarn_ramp(n_rot, c["n_ctx_orig"].get<int>(), base, c["beta_fast"].get<float>(),
                                        c["beta_slow"].get<float>());
        CHECK(ramp.low == c["low"].get<float>());
        CHECK(ramp.high == c["high"].get<float>());
        RopeParams p{head_dim, n_rot, base, 1.0f / factor, c["neox"].get<bool>(), nullptr, magnitude};
        p.ext_factor = 1.0f;
        p.yarn_low = ramp.low;
        p.yarn_high = ramp.high;
        const std::vector<float> x0 = c["x"];
        for (size_t i = 0; i < c["positions"].size(); ++i) {
            const int64_t pos = c["positions"][i];
            const std::vector<double> want = c["want"][i];
            // Two heads: every head turns alike.
            std::vector<float> x(x0);
            x.insert(x.end(), x0.begin(), x0.end());
            rope(x.data(), 2, pos, p);
            for (int d = 0; d < 2 * head_dim; ++d) {
                INFO("position " << pos << " value " << d);
                REQUIRE(x[d] == Approx(want[d % head_dim]).margin(2e-5));
            }
        }
    }
    // Without ext_factor the frequencies are all interpolated: plain linear scaling.
    RopeParams linear{4, 4, 100.0f, 0.5f, false, nullptr};
    linear.yarn_low = 0, linear.yarn_high = 1;
    std::vector<float> x{1, 0, 1, 0};
    rope(x.data(), 1, 6, linear);
    CHECK(x[0] == Approx(std::cos(3.0)));
    CHECK(x[3] == Approx(std::sin(0.3)));
}

TEST_CASE("swiglu_clamped: gpt-oss's SwiGLU, gate capped above and up clamped both ways", "[unit][cpu]") {
    auto g = normal_floats(257, 13), u = normal_floats(257, 14);
    for (size_t i = 0; i < g.size(); ++i) g[i] *= 6.0f, u[i] *= 6.0f;  // many past the limit
    g[0] = 7.0f, g[1] = 7.5f, u[2] = -9.0f, g[3] = -30.0f;
    const float alpha = 1.702f, limit = 7.0f;
    auto y = g;
    swiglu_clamped(y.data(), u.data(), int64_t(y.size()), alpha, limit);
    for (size_t i = 0; i < y.size(); ++i) {
        const double gc = std::min<double>(g[i], limit), uc = std::max<double>(-limit, std::min<double>(u[i], limit));
        const double want = gc / (1.0 + std::exp(-alpha * gc)) * (uc + 1.0);
        INFO("g " << g[i] << " u " << u[i]);
        REQUIRE(y[i] == Approx(want).epsilon(1e-5).margin(1e-6));
    }
}

TEST_CASE("attention matches a naive causal GQA implementation", "[unit][cpu]") {
    const int n_head = 6, n_head_kv = 2, hd = 8, n_tokens = 5, pos0 = 3, n_kv = pos0 + n_tokens;
    const int kv_stride = n_head_kv * hd + 4;  // padded rows
    auto q = normal_floats(n_tokens * n_head * hd, 4), k = normal_floats(n_kv * kv_stride, 5), v = normal_floats(n_kv * kv_stride, 6);
    std::vector<float> out(q.size());
    // AttentionArgs' strides are in bytes: 4 per float.
    AttentionArgs a{q.data(), k.data(), v.data(), out.data(), n_tokens, pos0, n_head, n_head_kv, hd, kv_stride * 4};
    attention(a);
    const auto want = attention_f64(q, n_tokens, pos0, n_head, n_head_kv, hd, rows(k, kv_stride), rows(v, kv_stride));
    for (size_t i = 0; i < out.size(); ++i) CHECK(out[i] == Approx(want[i]).margin(1e-5));
}

TEST_CASE("attention: every path matches the naive implementation on model-sized heads", "[unit][cpu]") {
    const CpuPath saved = active_path();
    struct Shape { int n_head, n_head_kv, hd, n_tokens, pos0; };
    // SmolLM2-like (9/3 heads of 64), TinyLlama-like (32/4), head_dim 128, a long decode step,
    // and a batch whose tiles end mid-group.
    const Shape shapes[] = {{9, 3, 64, 37, 5}, {32, 4, 64, 3, 100}, {8, 8, 128, 20, 0}, {6, 2, 64, 1, 700}, {12, 4, 32, 13, 17}};
    ThreadPool pool(2);
    for (const auto& sh : shapes) {
        const int n_kv = sh.pos0 + sh.n_tokens, kv_stride = sh.n_head_kv * sh.hd;
        auto q = normal_floats(size_t(sh.n_tokens) * sh.n_head * sh.hd, 7), k = normal_floats(size_t(n_kv) * kv_stride, 8),
             v = normal_floats(size_t(n_kv) * kv_stride, 9);
        for (auto& x : q) x *= 3.0f;  // peaked softmax rows as well as flat ones
        const auto want =
            attention_f64(q, sh.n_tokens, sh.pos0, sh.n_head, sh.n_head_kv, sh.hd, rows(k, kv_stride), rows(v, kv_stride));
        for (CpuPath path : {CpuPath::Scalar, CpuPath::Avx2, CpuPath::Avx512}) {
            if (!path_supported(path)) continue;
            set_active_path(path);
            std::vector<float> out(q.size(), NAN);
            AttentionArgs a{q.data(), k.data(), v.data(), out.data(), sh.n_tokens, sh.pos0, sh.n_head, sh.n_head_kv, sh.hd, kv_stride * 4};
            pool.run([&] { attention(a); });
            for (size_t i = 0; i < out.size(); ++i) {
                INFO("path " << path_name(path) << " heads " << sh.n_head << "/" << sh.n_head_kv << " hd " << sh.hd << " i " << i);
                REQUIRE(out[i] == Approx(want[i]).margin(2e-5));
            }
        }
    }
    set_active_path(saved);
}

TEST_CASE("attention over paged KV: scattered and shared blocks match the naive and contiguous results", "[unit][cpu]") {
    const CpuPath saved = active_path();
    ThreadPool pool(2);
    const int n_head = 9, n_head_kv = 3, hd = 64, bs = 16, kv_stride = n_head_kv * hd;
    const int64_t block_stride = bs * kv_stride + 32;  // padded blocks
    const int n_blocks = 12;
    auto kpool = normal_floats(size_t(n_blocks) * block_stride, 21), vpool = normal_floats(size_t(n_blocks) * block_stride, 22);
    // Two sequences share their first two blocks (a common prefix), then go their own way
    // through blocks in no particular order.
    const std::vector<int32_t> tables[] = {{7, 2, 10, 0, 5}, {7, 2, 3, 11}};
    struct Case { int seq, n_tokens, pos0; };
    const Case cases[] = {{0, 1, 70}, {0, 37, 20}, {1, 1, 55}, {1, 13, 40}, {0, 16, 0}};
    for (const auto& c : cases) {
        const auto& table = tables[c.seq];
        REQUIRE((c.pos0 + c.n_tokens + bs - 1) / bs <= int(table.size()));
        auto row = [&](const std::vector<float>& p, int j) { return &p[table[j / bs] * block_stride + (j % bs) * kv_stride]; };
        auto q = normal_floats(size_t(c.n_tokens) * n_head * hd, 23 + c.pos0);
        for (auto& x : q) x *= 3.0f;
        const auto want = attention_f64(q, c.n_tokens, c.pos0, n_head, n_head_kv, hd, by_rows([&](int j) { return row(kpool, j); }),
                                        by_rows([&](int j) { return row(vpool, j); }));
        // The same keys and values gathered into contiguous rows.
        const int n_kv = c.pos0 + c.n_tokens;
        std::vector<float> kc(size_t(n_kv) * kv_stride), vc(kc.size());
        for (int j = 0; j < n_kv; ++j) {
            std::copy_n(row(kpool, j), kv_stride, &kc[size_t(j) * kv_stride]);
            std::copy_n(row(vpool, j), kv_stride, &vc[size_t(j) * kv_stride]);
        }
        for (CpuPath path : {CpuPath::Scalar, CpuPath::Avx2, CpuPath::Avx512}) {
            if (!path_supported(path)) continue;
            set_active_path(path);
            std::vector<float> paged(q.size(), NAN), contiguous(q.size(), NAN);
            AttentionArgs a{q.data(), kpool.data(), vpool.data(), paged.data(), c.n_tokens, c.pos0, n_head, n_head_kv, hd, kv_stride * 4};
            a.block_table = table.data();
            a.block_size = bs;
            a.block_stride = block_stride * 4;
            pool.run([&] { attention(a); });
            AttentionArgs b{q.data(), kc.data(), vc.data(), contiguous.data(), c.n_tokens, c.pos0, n_head, n_head_kv, hd, kv_stride * 4};
            pool.run([&] { attention(b); });
            INFO("path " << path_name(path) << " seq " << c.seq << " tokens " << c.n_tokens << " pos0 " << c.pos0);
            CHECK(paged == contiguous);  // the same arithmetic, read in place
            for (size_t i = 0; i < paged.size(); ++i) REQUIRE(paged[i] == Approx(want[i]).margin(2e-5));
        }
    }
    set_active_path(saved);
}

TEST_CASE("swiglu: every path matches silu(g) * u", "[unit][cpu]") {
    const CpuPath saved = active_path();
    auto g = normal_floats(1003, 11), u = normal_floats(1003, 12);
    g[0] = -100.0f, g[1] = 100.0f, g[2] = 0.0f, g[3] = -87.5f;
    for (CpuPath path : {CpuPath::Scalar, CpuPath::Avx2, CpuPath::Avx512}) {
        if (!path_supported(path)) continue;
        set_active_path(path);
        auto y = g;
        swiglu(y.data(), u.data(), int64_t(y.size()));
        for (size_t i = 0; i < y.size(); ++i) {
            const double want = double(g[i]) / (1.0 + std::exp(-double(g[i]))) * u[i];
            INFO("path " << path_name(path) << " g " << g[i]);
            REQUIRE(y[i] == Approx(want).epsilon(1e-6).margin(1e-30));
        }
    }
    set_active_path(saved);
}

TEST_CASE("thread pool: parallel_for runs every task once, nested loops run inline, errors reach the caller", "[unit][cpu]") {
    ThreadPool pool(2);
    pool.run([&] {
        for (int64_t n : {1, 2, 3, 100, 1000}) {
            std::vector<int> hits(n, 0);
            parallel_for(n, [&](int64_t i) {
                ++hits[i];
                parallel_for(3, [&](int64_t) {});  // inline inside a task
            });
            for (int64_t i = 0; i < n; ++i) REQUIRE(hits[i] == 1);
        }
        CHECK_THROWS_AS(parallel_for(50, [](int64_t i) {
                            if (i == 17) throw std::runtime_error("task 17");
                        }),
                        std::runtime_error);
        int64_t sum = 0;
        parallel_for(1, [&](int64_t i) { sum += i + 1; });
        CHECK(sum == 1);
    });
    // Idle workers go to sleep and wake for the next job.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::atomic<int> count{0};
    pool.run([&] { parallel_for(64, [&](int64_t) { ++count; }); });
    CHECK(count == 64);
}
