// Attention over a paged KV cache of each element type (F32, F16, BF16, Q8_0), on the AVX-512
// kernel and the plain C++ reference, against attention in double over the values the cache
// holds (decoded by tests/support/kv_values.h); and the row converters against the formats'
// own rounding.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "core/error.h"
#include "cpu/attention_cpu.h"
#include "cpu/cpu_features.h"
#include "cpu/kv_format.h"
#include "cpu/thread_pool.h"
#include "tests/support/fixtures.h"
#include "tests/support/kv_values.h"
#include "tests/support/random_values.h"
#include "tests/support/reference_attention.h"
#include "tests/support/skip.h"

using namespace strata;
using namespace strata::cpu;
using strata::test::attention_f64;
using strata::test::kv_value;
using strata::test::normal_floats;

namespace {

constexpr DType kKvTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0};

// What converting to `type` may cost attention outputs of order 1 (values N(0, 1), softmax
// rows peaked by queries of sd 3 as well as flat ones), about twice the worst seen: F16
// rounds to 2^-11 relative (outputs off by < 2e-3), BF16 to 2^-8 (8x that), Q8_0 to half a
// step of amax / 127, about 0.01 for 32 normal values (< 0.06 over 128 dimensions), Q4_0 to
// half a step of amax / 8, 16 times coarser.
double conversion_tolerance(DType type) {
    switch (type) {
        case DType::F32: return 1e-5;
        case DType::F16: return 4e-3;
        case DType::BF16: return 4e-2;
        case DType::Q8_0: return 0.12;
        default: return 1.5;
    }
}

// Runs body(path) with each kernel set this CPU runs made the active one (the plain C++
// reference, AVX2's loops, AVX-512); the active path is restored after.
template <class Body>
void on_each_path(Body body) {
    const CpuPath saved = active_path();
    for (CpuPath path : {CpuPath::Scalar, CpuPath::Avx2, CpuPath::Avx512})
        if (path_supported(path)) set_active_path(path), body(path);
    set_active_path(saved);
}

// Runs `a` on each kernel this CPU has (the plain C++ reference, AVX2's loops, AVX-512) and
// hands each output to check(path, out); the active path is restored after.
template <class Check>
void on_each_kernel(ThreadPool& pool, AttentionArgs a, size_t n_out, Check check) {
    const CpuPath saved = active_path();
    for (CpuPath path : {CpuPath::Scalar, CpuPath::Avx2, CpuPath::Avx512}) {
        if (!path_supported(path)) {
            STRATA_SKIP_PART("this CPU has no " << path_name(path));
            continue;
        }
        set_active_path(path);
        std::vector<float> out(n_out, NAN);
        a.out = out.data();
        pool.run([&] { attention(a); });
        check(path, out);
    }
    set_active_path(saved);
}

}  // namespace

TEST_CASE("attention: every KV type on every kernel matches attention in double over a paged cache", "[unit][cpu]") {
    ThreadPool pool(2);
    struct Shape { int n_head, n_head_kv, hd, n_tokens, pos0; };
    // Odd head counts and lengths; head_dim 16 puts every other KV head mid-way through a Q8_0
    // block; head_dim 8 runs the reference even on the AVX-512 path.
    const Shape shapes[] = {{9, 3, 64, 37, 5}, {15, 5, 32, 1, 300}, {12, 4, 16, 13, 20}, {10, 2, 96, 3, 91}, {8, 4, 8, 5, 40},
                            {7, 1, 128, 1, 77}};
    constexpr int bs = 16;
    for (const DType type : kKvTypes)
        for (const auto& sh : shapes) {
            const int n_embd_kv = sh.n_head_kv * sh.hd, n_kv = sh.pos0 + sh.n_tokens;
            const int64_t row_bytes = static_cast<int64_t>(strata::row_bytes(type, n_embd_kv));
            const int64_t block_stride = bs * row_bytes + 96;  // padded blocks
            // The sequence's blocks scattered through a pool with spare blocks.
            const int n_blocks = (n_kv + bs - 1) / bs, pool_blocks = n_blocks + 3;
            std::vector<int32_t> table(pool_blocks);
            std::iota(table.begin(), table.end(), 0);
            std::shuffle(table.begin(), table.end(), std::mt19937(sh.pos0));
            table.resize(n_blocks);
            std::vector<std::byte> kpool(pool_blocks * block_stride), vpool(kpool.size());
            const auto k = normal_floats(size_t(n_kv) * n_embd_kv, 31 + sh.hd), v = normal_floats(k.size(), 32 + sh.hd);
            auto row = [&](std::vector<std::byte>& p, int j) { return &p[table[j / bs] * block_stride + (j % bs) * row_bytes]; };
            for (int j = 0; j < n_kv; ++j) {
                store_kv_row(type, &k[size_t(j) * n_embd_kv], row(kpool, j), n_embd_kv);
                store_kv_row(type, &v[size_t(j) * n_embd_kv], row(vpool, j), n_embd_kv);
            }
            auto q = normal_floats(size_t(sh.n_tokens) * sh.n_head * sh.hd, 33 + sh.n_tokens);
            for (size_t i = 0; i < q.size() / 2; ++i) q[i] *= 3.0f;  // peaked softmax rows as well as flat ones
            // Over the values the cache holds, and over the floats before conversion.
            const auto held = attention_f64(
                q, sh.n_tokens, sh.pos0, sh.n_head, sh.n_head_kv, sh.hd, [&](int j, int i) { return kv_value(type, row(kpool, j), i); },
                [&](int j, int i) { return kv_value(type, row(vpool, j), i); });
            const auto exact = attention_f64(
                q, sh.n_tokens, sh.pos0, sh.n_head, sh.n_head_kv, sh.hd, [&](int j, int i) { return k[size_t(j) * n_embd_kv + i]; },
                [&](int j, int i) { return v[size_t(j) * n_embd_kv + i]; });
            AttentionArgs a{q.data(), kpool.data(), vpool.data(), nullptr, sh.n_tokens, sh.pos0, sh.n_head, sh.n_head_kv, sh.hd,
                            row_bytes, type};
            a.block_table = table.data();
            a.block_size = bs;
            a.block_stride = block_stride;
            on_each_kernel(pool, a, q.size(), [&](CpuPath path, const std::vector<float>& out) {
                INFO("type " << dtype_name(type) << " path " << path_name(path) << " heads " << sh.n_head << "/" << sh.n_head_kv
                             << " hd " << sh.hd << " tokens " << sh.n_tokens << " pos0 " << sh.pos0);
                double worst_held = 0, worst_exact = 0;
                for (size_t i = 0; i < out.size(); ++i) {
                    worst_held = std::max(worst_held, std::abs(out[i] - held[i]));
                    worst_exact = std::max(worst_exact, std::abs(out[i] - exact[i]));
                }
                CHECK(worst_held <= 1e-5);  // the kernels add no error of their own beyond float sums
                CHECK(worst_exact <= conversion_tolerance(type));
            });
        }
}

TEST_CASE("attention: sliding windows, score scales and soft caps match attention in double", "[unit][cpu]") {
    ThreadPool pool(2);
    struct Case { int n_head, n_head_kv, hd, n_tokens, pos0; test::AttentionVariant var; };
    // Windows inside one 16-key block, across blocks and pages, longer than the context; a
    // prompt whose rows start at different keys in one tile; gemma's scale and caps.
    const Case cases[] = {{8, 2, 32, 37, 5, {5, 0, 0}},      {4, 1, 64, 1, 300, {40, 0, 0}},  {6, 3, 16, 20, 30, {17, 0, 0}},
                          {4, 4, 32, 9, 3, {1, 0, 0}},       {8, 4, 32, 12, 7, {64, 0.11, 0}}, {4, 2, 32, 25, 10, {0, 0.25, 2.0}},
                          {8, 1, 256, 3, 40, {8, 1.0 / 16, 5.0}}};
    constexpr int bs = 16;
    for (const auto& c : cases) {
        const int n_embd_kv = c.n_head_kv * c.hd, n_kv = c.pos0 + c.n_tokens;
        const int64_t row_bytes = static_cast<int64_t>(strata::row_bytes(DType::F32, n_embd_kv)), block_stride = bs * row_bytes;
        const int n_blocks = (n_kv + bs - 1) / bs;
        std::vector<int32_t> table(n_blocks);
        std::iota(table.rbegin(), table.rend(), 0);  // pages in reverse order
        const auto k = normal_floats(size_t(n_blocks) * bs * n_embd_kv, 41 + c.hd), v = normal_floats(k.size(), 42 + c.hd);
        auto row = [&](const std::vector<float>& p, int j) { return &p[(size_t(table[j / bs]) * bs + j % bs) * n_embd_kv]; };
        auto q = normal_floats(size_t(c.n_tokens) * c.n_head * c.hd, 43 + c.n_tokens);
        for (auto& x : q) x *= 2.0f;
        const auto want = attention_f64(
            q, c.n_tokens, c.pos0, c.n_head, c.n_head_kv, c.hd, [&](int j, int i) { return row(k, j)[i]; },
            [&](int j, int i) { return row(v, j)[i]; }, c.var);
        AttentionArgs a{q.data(), k.data(), v.data(), nullptr, c.n_tokens, c.pos0, c.n_head, c.n_head_kv, c.hd, row_bytes,
                        DType::F32};
        a.block_table = table.data();
        a.block_size = bs;
        a.block_stride = block_stride;
        a.window = c.var.window;
        a.scale = static_cast<float>(c.var.scale);
        a.softcap = static_cast<float>(c.var.softcap);
        on_each_kernel(pool, a, q.size(), [&](CpuPath path, const std::vector<float>& out) {
            INFO("path " << path_name(path) << " hd " << c.hd << " tokens " << c.n_tokens << " pos0 " << c.pos0 << " window "
                         << c.var.window << " scale " << c.var.scale << " cap " << c.var.softcap);
            double worst = 0;
            for (size_t i = 0; i < out.size(); ++i) worst = std::max(worst, std::abs(out[i] - want[i]));
            CHECK(worst <= 1e-5);
        });
    }
}

TEST_CASE("attention: sinks and narrower value heads (MLA's latent) match attention in double", "[unit][cpu]") {
    ThreadPool pool(2);
    constexpr int bs = 16;
    struct Case { int n_head, n_head_kv, hd, v_dim, n_tokens, pos0, window; bool sinks; DType type; };
    // gpt-oss: sinks, with and without a window; MLA decode and prefill: one KV head of 576 (512
    // latent + 64 RoPE) values whose first 512 are V, in float and in the quantized cache types;
    // a narrower V with several KV heads; a value width the AVX-512 tile takes in pieces.
    const Case cases[] = {{8, 2, 64, 64, 5, 30, 0, true, DType::F32},    {8, 4, 32, 32, 19, 7, 8, true, DType::F16},
                          {16, 1, 576, 512, 1, 70, 0, false, DType::F32}, {16, 1, 576, 512, 9, 20, 0, false, DType::BF16},
                          {4, 1, 576, 512, 3, 40, 0, true, DType::Q8_0},  {6, 2, 96, 64, 4, 33, 0, false, DType::F32},
                          {4, 1, 208, 160, 2, 17, 0, true, DType::F32}};
    for (const auto& c : cases) {
        const int n_embd_kv = c.n_head_kv * c.hd, n_kv = c.pos0 + c.n_tokens, n_blocks = (n_kv + bs - 1) / bs;
        const int64_t row_bytes = static_cast<int64_t>(strata::row_bytes(c.type, n_embd_kv)), block_stride = bs * row_bytes;
        std::vector<int32_t> table(n_blocks);
        std::iota(table.rbegin(), table.rend(), 0);
        // V inside K's rows when there is one KV head (MLA), else a cache of its own.
        const bool v_in_k = c.n_head_kv == 1;
        const int v_row = v_in_k ? n_embd_kv : c.n_head_kv * c.v_dim;
        std::vector<std::byte> kpool(size_t(n_blocks) * block_stride), vpool(v_in_k ? 0 : kpool.size());
        const auto k = normal_floats(size_t(n_kv) * n_embd_kv, 51 + c.hd), v = normal_floats(size_t(n_kv) * v_row, 52 + c.hd);
        auto at = [&](std::vector<std::byte>& p, int j) { return &p[table[j / bs] * block_stride + (j % bs) * row_bytes]; };
        for (int j = 0; j < n_kv; ++j) {
            store_kv_row(c.type, &k[size_t(j) * n_embd_kv], at(kpool, j), n_embd_kv);
            if (!v_in_k) store_kv_row(c.type, &v[size_t(j) * v_row], at(vpool, j), v_row);
        }
        std::vector<std::byte>& vsrc = v_in_k ? kpool : vpool;
        // A separate V cache's rows are K's stride apart (AttentionArgs), narrower rows padded.
        auto q = normal_floats(size_t(c.n_tokens) * c.n_head * c.hd, 53 + c.n_tokens);
        for (auto& x : q) x *= 0.3f;
        const auto sinks = normal_floats(c.n_head, 54);
        test::AttentionVariant var{c.window, 0, 0, c.sinks ? sinks.data() : nullptr, c.v_dim};
        const auto want = attention_f64(
            q, c.n_tokens, c.pos0, c.n_head, c.n_head_kv, c.hd, [&](int j, int i) { return kv_value(c.type, at(kpool, j), i); },
            [&](int j, int i) { return kv_value(c.type, at(vsrc, j), i); }, var);
        AttentionArgs a{q.data(), kpool.data(), vsrc.data(), nullptr, c.n_tokens, c.pos0, c.n_head, c.n_head_kv, c.hd,
                        row_bytes, c.type};
        a.block_table = table.data();
        a.block_size = bs;
        a.block_stride = block_stride;
        a.window = c.window;
        a.sinks = var.sinks;
        a.v_head_dim = c.v_dim;
        on_each_kernel(pool, a, want.size(), [&](CpuPath path, const std::vector<float>& out) {
            INFO("path " << path_name(path) << " heads " << c.n_head << "/" << c.n_head_kv << " hd " << c.hd << " v " << c.v_dim
                         << " tokens " << c.n_tokens << " sinks " << c.sinks << " type " << dtype_name(c.type));
            double worst = 0;
            for (size_t i = 0; i < out.size(); ++i) worst = std::max(worst, std::abs(out[i] - want[i]));
            CHECK(worst <= 1e-5);
        });
    }
    // A sink takes weight from the keys: one key whose score equals the sink gets half.
    std::vector<float> q1(16, 0.0f), k1(16, 0.0f), v1(16, 2.0f), out(16), sink = {0.0f};
    AttentionArgs one{q1.data(), k1.data(), v1.data(), out.data(), 1, 0, 1, 1, 16, 64, DType::F32};
    one.sinks = sink.data();
    pool.run([&] { attention(one); });
    CHECK(out[3] == Approx(1.0f));
    one.v_head_dim = 32;
    CHECK_THROWS_AS(attention(one), UsageError);  // values wider than keys
}

TEST_CASE("attention: a type the KV cache cannot hold is refused", "[unit][cpu]") {
    std::vector<float> q(16), out(16);
    std::vector<std::byte> kv(1024);
    AttentionArgs a{q.data(), kv.data(), kv.data(), out.data(), 1, 0, 1, 1, 16, 18, DType::Q4_K};
    CHECK_FALSE(is_kv_type(DType::Q4_K));
    CHECK_THROWS_AS(attention(a), UsageError);
}

TEST_CASE("KV rows: F16 and BF16 round to nearest even, Q8_0 and Q4_0 to ggml's blocks", "[unit][cpu]") {
    auto x = normal_floats(256, 41, 3.0f);
    x[0] = 0;
    x[1] = 65504;                 // the largest half
    x[2] = 1e-6f;                 // a half subnormal
    x[3] = 1.0f + 0x1p-11f;       // a tie: to even (1.0) in F16
    x[4] = 1.0f + 0x1p-8f;        // a tie: to even (1.0) in BF16
    for (int i = 32; i < 64; ++i) x[i] = 0;  // an all-zero Q8_0 block
    for (const DType type : kKvTypes) {
        std::vector<std::byte> row(strata::row_bytes(type, 256));
        store_kv_row(type, x.data(), row.data(), 256);
        std::vector<float> back(256);
        load_kv_values(type, row.data(), 0, back.data(), 256);
        std::vector<float> part(40);
        load_kv_values(type, row.data(), 17, part.data(), 40);  // from mid-block
        for (int i = 0; i < 256; ++i) {
            INFO(dtype_name(type) << " value " << i << " = " << x[i]);
            const double got = kv_value(type, row.data(), i);
            CHECK(back[i] == static_cast<float>(got));
            if (i >= 17 && i < 57) CHECK(part[i - 17] == back[i]);
            switch (type) {
                case DType::F32: CHECK(got == x[i]); break;
                case DType::F16: CHECK(got == static_cast<double>(static_cast<_Float16>(x[i]))); break;
                case DType::BF16: {
                    // Nearest of the two bfloat16 neighbours (bits truncated, and one up).
                    uint32_t u;
                    std::memcpy(&u, &x[i], 4);
                    const double lo = test::bf16_value(uint16_t(u >> 16)), hi = test::bf16_value(uint16_t((u >> 16) + 1));
                    CHECK(std::abs(got - x[i]) <= std::min(std::abs(lo - x[i]), std::abs(hi - x[i])));
                    break;
                }
                case DType::Q4_0: {
                    // The block's scale is its largest-magnitude value / -8 (as a half); each value
                    // within a step of it (half a step but at the clipped opposite extreme).
                    const int b = i / 32;
                    float max = 0;
                    for (int j = 0; j < 32; ++j)
                        if (std::abs(x[b * 32 + j]) > std::abs(max)) max = x[b * 32 + j];
                    uint16_t h;
                    std::memcpy(&h, row.data() + b * 18, 2);
                    const double d = test::half_value(h);
                    CHECK(d == static_cast<double>(static_cast<_Float16>(max / -8)));
                    CHECK(std::abs(got - x[i]) <= std::abs(d) + 8 * std::abs(d - max / -8.0) + 1e-9);
                    break;
                }
                default: {
                    // The block's scale is amax / 127 (as a half); each value within half a step of it.
                    const int b = i / 32;
                    float amax = 0;
                    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::abs(x[b * 32 + j]));
                    uint16_t h;
                    std::memcpy(&h, row.data() + b * 34, 2);
                    const double d = test::half_value(h);
                    CHECK(d == static_cast<double>(static_cast<_Float16>(amax / 127)));
                    CHECK(std::abs(got - x[i]) <= 0.5 * amax / 127 + 127 * std::abs(d - amax / 127.0) + 1e-9);
                }
            }
        }
    }
    CHECK(test::half_value(0x3C00) == 1.0);  // the decoders themselves
    CHECK(test::bf16_value(0x3F80) == 1.0);
}

TEST_CASE("KV rows: every F16 bit pattern reads back as its value", "[unit][cpu]") {
    std::vector<uint16_t> all(65536);
    std::iota(all.begin(), all.end(), 0);
    std::vector<float> got(all.size());
    load_kv_values(DType::F16, all.data(), 0, got.data(), static_cast<int64_t>(all.size()));
    int wrong = 0;
    for (uint32_t h = 0; h < all.size(); ++h) {
        const bool special = ((h >> 10) & 31) == 31;  // infinities (mantissa 0) and NaNs
        const bool ok = !special                ? got[h] == static_cast<float>(test::half_value(uint16_t(h)))
                        : (h & 1023) == 0        ? std::isinf(got[h]) && std::signbit(got[h]) == bool(h & 0x8000)
                                                 : std::isnan(got[h]);
        wrong += !ok;
    }
    CHECK(wrong == 0);
}

TEST_CASE("KV rows: Q8_0 and Q4_0 blocks are the bytes gguf-py's quantizer writes", "[unit][cpu]") {
    for (const DType type : {DType::Q8_0, DType::Q4_0}) {
        INFO(dtype_name(type));
        const std::string name = type == DType::Q8_0 ? "q8_0" : "q4_0";
        const auto in = test::read_fixture_bytes("kv/" + name + ".in.f32");
        const auto want = test::read_fixture_bytes("kv/" + name + ".bin");
        constexpr int64_t kRow = 256;
        const size_t n_rows = in.size() / (kRow * sizeof(float));
        REQUIRE(want.size() == n_rows * strata::row_bytes(type, kRow));
        std::vector<float> x(in.size() / sizeof(float));
        std::memcpy(x.data(), in.data(), in.size());
        std::vector<uint8_t> got(want.size());
        for (size_t r = 0; r < n_rows; ++r)
            store_kv_row(type, &x[r * kRow], &got[r * strata::row_bytes(type, kRow)], kRow);
        CHECK(got == want);
    }
}

namespace {

// A sequence's K and V of `type` in a paged cache whose blocks are shuffled through a pool
// with spare blocks, filled with N(0, 1) values.
struct PagedKv {
    static constexpr int kBlock = 16;
    DType type;
    int n_embd_kv, n_kv;
    int64_t row_bytes, block_stride;
    std::vector<int32_t> table;
    std::vector<std::byte> k, v;

    PagedKv(DType t, int n_embd, int n, uint32_t seed)
        : type(t), n_embd_kv(n_embd), n_kv(n), row_bytes(static_cast<int64_t>(strata::row_bytes(t, n_embd))),
          block_stride(kBlock * row_bytes + 64) {
        const int n_blocks = (n + kBlock - 1) / kBlock;
        table.resize(size_t(n_blocks) + 2);
        std::iota(table.begin(), table.end(), 0);
        std::shuffle(table.begin(), table.end(), std::mt19937(seed));
        k.resize(table.size() * block_stride), v.resize(k.size());
        table.resize(size_t(n_blocks));
        const auto kf = normal_floats(size_t(n) * n_embd, seed + 1), vf = normal_floats(kf.size(), seed + 2);
        for (int j = 0; j < n; ++j) {
            store_kv_row(type, &kf[size_t(j) * n_embd], row(k, j), n_embd);
            store_kv_row(type, &vf[size_t(j) * n_embd], row(v, j), n_embd);
        }
    }
    std::byte* row(std::vector<std::byte>& p, int j) { return &p[table[j / kBlock] * block_stride + (j % kBlock) * row_bytes]; }
    double key(int j, int i) { return kv_value(type, row(k, j), i); }
    double value(int j, int i) { return kv_value(type, row(v, j), i); }
    AttentionArgs args(const float* q, int n_tokens, int n_head, int n_head_kv, int hd) {
        AttentionArgs a{q, k.data(), v.data(), nullptr, n_tokens, n_kv - n_tokens, n_head, n_head_kv, hd, row_bytes, type};
        a.block_table = table.data();
        a.block_size = kBlock;
        a.block_stride = block_stride;
        return a;
    }
};

}  // namespace

TEST_CASE("attention: long decode rows split over their keys match attention in double", "[unit][cpu]") {
    ThreadPool pool(2);
    struct Case { int n_head, n_head_kv, hd, v_dim, n_tokens, n_kv; test::AttentionVariant var; DType type; };
    // Rows past kAttentionSplitKeys keys, a single row and a few tokens whose rows end either side
    // of a part's edge; windows that leave whole parts unseen; a sink, a soft cap, MLA's narrower
    // values; each KV cache type.
    std::vector<Case> cases;
    for (DType type : kKvTypes) cases.push_back({9, 3, 64, 0, 1, 1500, {}, type});
    const float sinks[16] = {0.5f, -1.0f, 2.0f, 0.0f, 1.5f, -0.5f, 3.0f, 1.0f, 0.2f, -2.0f, 0.7f, 1.1f, -0.3f, 0.9f, 2.5f, -1.5f};
    cases.push_back({9, 3, 64, 0, 3, 1026, {}, DType::F16});
    cases.push_back({8, 2, 32, 0, 15, 1300, {}, DType::F32});
    cases.push_back({9, 3, 64, 0, 1, 2100, {700, 0, 0}, DType::F16});
    cases.push_back({8, 4, 32, 0, 5, 1800, {100, 0, 0}, DType::F32});
    cases.push_back({8, 2, 64, 0, 2, 1200, {0, 0, 0, sinks}, DType::F16});
    cases.push_back({8, 2, 64, 0, 1, 1100, {300, 0, 0, sinks}, DType::Q8_0});
    cases.push_back({4, 2, 32, 0, 4, 1500, {0, 0.2, 2.0}, DType::F32});
    cases.push_back({16, 1, 576, 512, 1, 1100, {0, 0, 0, nullptr, 512}, DType::BF16});
    for (const Case& c : cases) {
        PagedKv kv(c.type, c.n_head_kv * c.hd, c.n_kv, uint32_t(c.n_kv + c.hd));
        auto q = normal_floats(size_t(c.n_tokens) * c.n_head * c.hd, 61 + c.n_tokens);
        for (size_t i = 0; i < q.size() / 2; ++i) q[i] *= 3.0f;  // peaked rows as well as flat ones
        const bool v_in_k = c.var.v_dim > 0;  // MLA: V is the first v_dim values of K's row
        const auto want = attention_f64(
            q, c.n_tokens, c.n_kv - c.n_tokens, c.n_head, c.n_head_kv, c.hd, [&](int j, int i) { return kv.key(j, i); },
            [&](int j, int i) { return v_in_k ? kv.key(j, i) : kv.value(j, i); }, c.var);
        AttentionArgs a = kv.args(q.data(), c.n_tokens, c.n_head, c.n_head_kv, c.hd);
        if (v_in_k) a.v = a.k;
        a.window = c.var.window;
        a.scale = static_cast<float>(c.var.scale);
        a.softcap = static_cast<float>(c.var.softcap);
        a.sinks = c.var.sinks;
        a.v_head_dim = c.var.v_dim;
        on_each_kernel(pool, a, want.size(), [&](CpuPath path, const std::vector<float>& out) {
            INFO("path " << path_name(path) << " type " << dtype_name(c.type) << " heads " << c.n_head << "/" << c.n_head_kv
                         << " tokens " << c.n_tokens << " keys " << c.n_kv << " window " << c.var.window << " sinks "
                         << (c.var.sinks != nullptr) << " cap " << c.var.softcap);
            double worst = 0;
            for (size_t i = 0; i < out.size(); ++i) worst = std::max(worst, std::abs(out[i] - want[i]));
            CHECK(worst <= 1e-5);
        });
    }
}

TEST_CASE("attention: a batch's rows are what each sequence gets alone, on any number of threads", "[unit][cpu]") {
    // Decode rows short and long (split), a few tokens, a prompt: one loop over all their tasks.
    const int n_head = 9, n_head_kv = 3, hd = 64;
    const int depths[] = {100, 700, 2600, 1030, 40};
    const int tokens[] = {1, 1, 1, 4, 20};
    std::vector<PagedKv> caches;
    std::vector<std::vector<float>> qs;
    std::vector<AttentionArgs> batch;
    for (int i = 0; i < 5; ++i) {
        caches.emplace_back(DType::F16, n_head_kv * hd, depths[i], uint32_t(70 + i));
        qs.push_back(normal_floats(size_t(tokens[i]) * n_head * hd, uint32_t(80 + i)));
    }
    for (int i = 0; i < 5; ++i) batch.push_back(caches[size_t(i)].args(qs[size_t(i)].data(), tokens[i], n_head, n_head_kv, hd));
    auto outputs = [&](int threads, bool together) {
        std::vector<std::vector<float>> out;
        for (int i = 0; i < 5; ++i) out.emplace_back(qs[size_t(i)].size(), NAN), batch[size_t(i)].out = out.back().data();
        ThreadPool pool(threads);
        pool.run([&] {
            if (together) attention_batch(batch);
            else
                for (const AttentionArgs& a : batch) attention(a);
        });
        return out;
    };
    const auto alone = outputs(1, false);
    CHECK(outputs(1, true) == alone);
    CHECK(outputs(2, true) == alone);
    CHECK(outputs(3, false) == alone);
}

TEST_CASE("attention: on every kernel a verify pass's rows are a decode step's bits, however many, chains and trees", "[unit][cpu]") {
    // 20 rows (more than a pass of plain decode rows) at positions 1010..1029 (past the edges of
    // parts at 512 and 1024) and 500..519 (rows below the first edge are a decode step's unsplit
    // rows, those past it split), each against the same row computed alone as a decode step.
    const int n_head = 9, n_head_kv = 3, hd = 64, n_tokens = 20;
    ThreadPool pool(2);
    on_each_path([&](CpuPath kernel) {
        for (const int n_kv : {1030, 520}) {
            for (DType type : {DType::F16, DType::Q4_0}) {
                PagedKv kv(type, n_head_kv * hd, n_kv, 91);
                const auto q = normal_floats(size_t(n_tokens) * n_head * hd, 92);
                const int64_t row = int64_t(n_head) * hd;
                auto alone = [&](int t) {  // token t as a decode step computes it: one row at its position
                    std::vector<float> out(size_t(row), NAN);
                    AttentionArgs a = kv.args(q.data() + t * row, 1, n_head, n_head_kv, hd);
                    a.pos0 = n_kv - n_tokens + t;
                    a.out = out.data();
                    pool.run([&] { attention(a); });
                    return out;
                };
                std::vector<float> chain(q.size(), NAN);
                AttentionArgs verify = kv.args(q.data(), n_tokens, n_head, n_head_kv, hd);
                verify.rows = AttentionRows::Decode;
                verify.out = chain.data();
                pool.run([&] { attention(verify); });
                for (int t = 0; t < n_tokens; ++t) {
                    INFO(path_name(kernel) << ", " << dtype_name(type) << " keys " << n_kv << " token " << t);
                    CHECK(std::vector<float>(chain.begin() + t * row, chain.begin() + (t + 1) * row) == alone(t));
                }
                // A chain of 6 drafts laid out as a tree from position 1024 (within one part): each node
                // as its position's decode step.
                if (n_kv < 1030) continue;
                const int64_t base = 1024, nodes = 6;
                std::vector<int64_t> slot(nodes), pos(nodes), key_pos(nodes);
                for (int64_t i = 0; i < nodes; ++i) slot[size_t(i)] = pos[size_t(i)] = key_pos[size_t(i)] = base + i;
                std::vector<uint64_t> mask(nodes);
                for (int64_t i = 0; i < nodes; ++i) mask[size_t(i)] = (uint64_t{2} << i) - 1;  // itself and every node before it
                const AttentionTree tree{base, slot.data(), pos.data(), key_pos.data(), mask.data(), 1};
                std::vector<float> treed(size_t(nodes * row), NAN);
                AttentionArgs t_args = kv.args(q.data() + (base - (n_kv - n_tokens)) * row, int(nodes), n_head, n_head_kv, hd);
                t_args.tree = &tree;
                t_args.rows = AttentionRows::Decode;
                t_args.out = treed.data();
                pool.run([&] { attention(t_args); });
                for (int64_t i = 0; i < nodes; ++i) {
                    INFO(path_name(kernel) << ", " << dtype_name(type) << " tree node " << i);
                    CHECK(std::vector<float>(treed.begin() + i * row, treed.begin() + (i + 1) * row) ==
                          alone(int(base - (n_kv - n_tokens) + i)));
                }
            }
        }
    });
}

TEST_CASE("attention: on every kernel a branching draft tree's nodes are each branch's decode steps' bits", "[unit][cpu]") {
    // A tree from position `base`: a root, two siblings at base + 1 (slots base + 1 and + 2), a
    // child of the second sibling at base + 2 (slot base + 3), a child of the first at base + 2
    // (slot base + 4). Each node must get the bits its branch gets decoded as a chain: the
    // cache's first `base` keys, then its ancestors' and its own keys at consecutive positions.
    // From 1024 (rows split over their keys, the tree in one part) and from 250 (whole rows, the
    // tree across a vector of 16 keys).
    const int64_t base = GENERATE(1024, 250);
    const int n_head = 9, n_head_kv = 3, hd = 64, n_kv = int(base) + 5;
    const int64_t nodes = 5, row = int64_t(n_head) * hd;
    const std::vector<std::vector<int64_t>> branch = {{0}, {0, 1}, {0, 2}, {0, 2, 3}, {0, 1, 4}};  // each node's path
    std::vector<int64_t> slot(nodes), pos(nodes), key_pos(nodes);
    std::vector<uint64_t> mask(nodes, 0);
    for (int64_t i = 0; i < nodes; ++i) {
        slot[size_t(i)] = base + i;
        pos[size_t(i)] = key_pos[size_t(i)] = base + int64_t(branch[size_t(i)].size()) - 1;
        for (int64_t a : branch[size_t(i)]) mask[size_t(i)] |= uint64_t{1} << a;
    }
    const AttentionTree tree{base, slot.data(), pos.data(), key_pos.data(), mask.data(), 1};
    ThreadPool pool(2);
    on_each_path([&](CpuPath kernel) {
        for (DType type : {DType::F16, DType::Q4_0}) {
            PagedKv kv(type, n_head_kv * hd, n_kv, 95);
            const auto q = normal_floats(size_t(nodes) * row, 96);
            std::vector<float> treed(q.size(), NAN);
            AttentionArgs t_args = kv.args(q.data(), int(nodes), n_head, n_head_kv, hd);
            t_args.tree = &tree;
            t_args.rows = AttentionRows::Decode;
            t_args.out = treed.data();
            pool.run([&] { attention(t_args); });
            for (int64_t i = 0; i < nodes; ++i) {
                // The branch as a chain: the same cache with the path's rows moved to consecutive slots.
                PagedKv chain(type, n_head_kv * hd, n_kv, 95);
                const auto& path = branch[size_t(i)];
                for (size_t d = 0; d < path.size(); ++d) {
                    const int from = int(base + path[d]), to = int(base + int64_t(d));
                    std::memcpy(chain.row(chain.k, to), kv.row(kv.k, from), size_t(kv.row_bytes));
                    std::memcpy(chain.row(chain.v, to), kv.row(kv.v, from), size_t(kv.row_bytes));
                }
                std::vector<float> alone(size_t(row), NAN);
                AttentionArgs a = chain.args(q.data() + i * row, 1, n_head, n_head_kv, hd);
                a.pos0 = pos[size_t(i)];
                a.out = alone.data();
                pool.run([&] { attention(a); });
                INFO(path_name(kernel) << ", " << dtype_name(type) << " tree node " << i);
                CHECK(std::vector<float>(treed.begin() + i * row, treed.begin() + (i + 1) * row) == alone);
            }
        }
    });
}

TEST_CASE("attention: a prompt's last rows computed after a cached prefix are the whole prompt's bits", "[unit][cpu]") {
    // A prompt of 840 tokens computed in one pass, and its last 8 computed alone after the
    // first 832 came from a cache: a prompt row is never split, however few share its pass.
    const int n_head = 9, n_head_kv = 3, hd = 64, n_kv = 840, tail = 8;
    ThreadPool pool(2);
    PagedKv kv(DType::Q4_0, n_head_kv * hd, n_kv, 93);
    const auto q = normal_floats(size_t(n_kv) * n_head * hd, 94);
    const int64_t row = int64_t(n_head) * hd;
    std::vector<float> whole(q.size(), NAN), last(size_t(tail * row), NAN);
    AttentionArgs all = kv.args(q.data(), n_kv, n_head, n_head_kv, hd);
    all.rows = AttentionRows::Prompt;
    all.out = whole.data();
    AttentionArgs rest = kv.args(q.data() + (n_kv - tail) * row, tail, n_head, n_head_kv, hd);
    rest.rows = AttentionRows::Prompt;
    rest.out = last.data();
    pool.run([&] { attention(all), attention(rest); });
    CHECK(std::vector<float>(whole.end() - tail * row, whole.end()) == last);
}
