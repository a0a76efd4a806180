// KV layers rebuilt from saved hidden states (the plan's recompute) give the logits of a cache
// that keeps K and V, for one sequence and for a batch whose sequences share prefix blocks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "runtime/kv/kv_cache.h"
#include "tests/support/tiny_engine.h"
#include "tests/support/tiny_model.h"

using namespace strata;
using namespace strata::models;
using namespace strata::runtime;

namespace {

KvCache rebuilt_cache(const Hparams& hp, std::vector<bool> rebuilt, DType type) {
    KvSpillOptions o;
    o.n_resident_layers = hp.n_layer;
    o.rebuilt = std::move(rebuilt);
    o.n_embd_hidden = hp.n_embd;
    return KvCache(hp.n_layer, 64, hp.n_embd_kv(), o, 0, type);
}

// The largest difference between two logit vectors, relative to the largest logit.
double relative_gap(const std::vector<float>& a, const std::vector<float>& b) {
    REQUIRE(a.size() == b.size());
    double gap = 0, top = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        gap = std::max(gap, double(std::fabs(a[i] - b[i])));
        top = std::max(top, double(std::fabs(a[i])));
    }
    return gap / top;
}

}  // namespace

TEST_CASE("kv cache: rebuilt layers keep hidden rows and share one K/V slot", "[unit][kv]") {
    constexpr int32_t n_layer = 4, n_embd_kv = 32, n_embd = 64;
    KvSpillOptions o;
    o.n_resident_layers = n_layer;
    o.rebuilt = {false, true, false, true};
    o.n_embd_hidden = n_embd;
    KvCache kv(n_layer, 64, n_embd_kv, o, 0, DType::F32);
    KvCache plain(n_layer, 64, n_embd_kv, 0, DType::F32);
    CHECK(kv.n_rebuilt() == 2);
    CHECK((kv.rebuilt(1) && kv.rebuilt(3) && !kv.rebuilt(0) && !kv.rebuilt(2)));
    CHECK(kv.k(1, 2) == kv.k(3, 2));  // one slot for every rebuilt layer
    CHECK(kv.k(0, 2) != kv.k(2, 2));
    CHECK(kv.k(1, 2) != kv.k(0, 2));
    // 2 K/V layers + the shared slot + 2 hidden layers of n_embd = 2 n_embd_kv values.
    CHECK(kv.bytes() == plain.bytes() / 4 * 3 + 2 * KvCache::hidden_layer_bytes(kv.pool().n_blocks(), n_embd, DType::F32));

    std::vector<float> x(n_embd), back(n_embd);
    for (int i = 0; i < n_embd; ++i) x[i] = 0.25f * float(i) - 3.0f;
    kv.store_hidden(3, 1, 5, x.data());
    const auto* row = reinterpret_cast<const float*>(kv.hidden(3, 1) + 5 * kv.hidden_row_bytes());
    CHECK(std::vector<float>(row, row + n_embd) == x);

    o.n_resident_layers = 3;  // layer 3 would spill
    CHECK_THROWS_AS(KvCache(n_layer, 64, n_embd_kv, o, 0, DType::F32), UsageError);
}

TEST_CASE("forward: KV rebuilt from saved hidden states gives the logits of stored K/V", "[unit][kv]") {
    test::TinyCpuModel m("kv_rebuild_model.gguf", test::tiny_config("llama", 128, 4, 256), 11);
    const std::vector<int32_t> ids{7, 1, 2, 80, 44, 3, 9, 12, 70, 31, 5, 17};

    auto run = [&](KvCache& kv) { return m.prompt_then_steps(ids, 6, kv); };
    // Two sequences sharing their first block, then decoded together.
    auto run_batch = [&](KvCache& kv) {
        std::vector<int32_t> a(20), b(23);
        for (int i = 0; i < 20; ++i) a[i] = (i * 7 + 3) % m.hp.n_vocab;
        std::copy_n(a.begin(), 16, b.begin());
        for (int i = 16; i < 23; ++i) b[i] = (i * 5 + 1) % m.hp.n_vocab;
        std::vector<float> all, out;
        const SeqId sa = kv.create_seq();
        REQUIRE(kv.reserve(sa, 20));
        const SeqTokens first[] = {{sa, a}};
        m.pool.run([&] { m.backend.eval_batch(first, kv, out); });
        all.insert(all.end(), out.begin(), out.end());
        const SeqId sb = kv.create_seq();
        const int32_t shared = kv.attach_prefix(sb, b);
        CHECK(shared == 16);
        REQUIRE(kv.reserve(sb, 23 - shared));
        const SeqTokens second[] = {{sb, std::span(b).subspan(shared)}};
        m.pool.run([&] { m.backend.eval_batch(second, kv, out); });
        all.insert(all.end(), out.begin(), out.end());
        for (int32_t step = 0; step < 3; ++step) {
            const int32_t ta = 40 + step, tb = 50 + step;
            REQUIRE((kv.reserve(sa, 1) && kv.reserve(sb, 1)));
            const SeqTokens both[] = {{sa, {&ta, 1}}, {sb, {&tb, 1}}};
            m.pool.run([&] { m.backend.eval_batch(both, kv, out); });
            all.insert(all.end(), out.begin(), out.end());
        }
        return all;
    };
    // The cache's own rounding, against an F32 cache, sets the tolerance for each type: a
    // rebuilt layer rounds the hidden state where a stored one rounds K and V.
    KvCache exact(m.hp.n_layer, 64, m.hp.n_embd_kv(), 0, DType::F32);
    const auto want_exact = run(exact);
    for (const DType type : {DType::F32, DType::F16, DType::Q8_0}) {
        INFO(dtype_name(type));
        KvCache plain(m.hp.n_layer, 64, m.hp.n_embd_kv(), 0, type);
        const auto want = run(plain);
        KvCache plain_batch(m.hp.n_layer, 64, m.hp.n_embd_kv(), 0, type);
        const auto want_batch = run_batch(plain_batch);
        // F32 weights: a rebuilt row may take the other matmul strategy than it first did
        // (tests/unit/runtime/exec/cpu/test_cpu_backend.cpp), so F32 is equal up to float rounding; a wrong
        // position, block or weight shows as a gap of order 1.
        const double tolerance = 1e-5 + 2 * relative_gap(want, want_exact);
        for (const auto& layers : {std::vector<bool>{true, true, true, true}, std::vector<bool>{false, true, false, true}}) {
            KvCache kv = rebuilt_cache(m.hp, layers, type);
            const double gap = relative_gap(run(kv), want);
            CHECK(gap < tolerance);
            KvCache kv_batch = rebuilt_cache(m.hp, layers, type);
            CHECK(relative_gap(run_batch(kv_batch), want_batch) < tolerance);
        }
    }
}

TEST_CASE("forward: rebuilt keys of QK-normed, sliding-window layers give the logits of stored K/V", "[unit][kv]") {
    // The rebuild prepares keys as the forward pass does (qk_prep): per-head norms, each
    // layer's RoPE base; gemma3's local layers and qwen3 with a head size apart from n_embd.
    auto qwen3 = test::tiny_config("qwen3", 128, 2, 256);
    qwen3["qk_norm"] = true, qwen3["head_dim"] = 64;
    auto gemma3 = test::tiny_config("gemma3", 128, 3, 256);
    gemma3["qk_norm"] = true, gemma3["post_norms"] = true, gemma3["swa"] = 5, gemma3["swa_pattern"] = 3;
    gemma3["rope_base_swa"] = 500.0;
    for (const auto& config : {qwen3, gemma3}) {
        const std::string arch = config["arch"];
        SECTION(arch) {
            test::TinyCpuModel m("kv_rebuild_" + arch + ".gguf", config, 13);
            const std::vector<int32_t> ids{7, 1, 2, 80, 44, 3, 9, 12, 70, 31, 5, 17};
            KvCache plain(m.hp.n_layer, 64, m.hp.n_embd_kv(), 0, DType::F32);
            const auto want = m.prompt_then_steps(ids, 6, plain);
            KvCache kv = rebuilt_cache(m.hp, std::vector<bool>(m.hp.n_layer, true), DType::F32);
            CHECK(relative_gap(m.prompt_then_steps(ids, 6, kv), want) < 1e-5);
        }
    }
}
