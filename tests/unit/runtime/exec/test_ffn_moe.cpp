// The mixture-of-experts feed-forward beyond the reference's logits (test_architectures.cpp):
// rows grouped by expert give every sequence of a batch the bits it gets alone, and the
// routing counts add up to the tokens run times the experts each uses.
#include <catch2/catch.hpp>

#include <cstring>
#include <numeric>

#include "runtime/exec/routing_stats.h"
#include "runtime/kv/kv_cache.h"
#include "tests/support/tiny_engine.h"
#include "tests/support/tiny_model.h"

using namespace strata;
using namespace strata::runtime;

namespace {
nlohmann::json moe_config(const std::string& arch) {
    auto c = test::tiny_config(arch, 64, 2, 96);
    c["n_expert"] = 8;
    c["n_expert_used"] = 3;
    c["n_ff_exp"] = 32;
    c["qk_norm"] = arch == "qwen3moe";
    return c;
}
}  // namespace

TEST_CASE("moe: a batch of prompts and decode steps gives each sequence its logits alone", "[unit][moe]") {
    for (const std::string arch : {"qwen3moe", "llama"}) {
        SECTION(arch) {
            test::TinyForward t("moe_batch_" + arch + ".gguf", moe_config(arch), 17);
            REQUIRE(t.hp.moe.enabled());
            const int64_t V = t.hp.n_vocab;
            // Two long prompts (their float rows run apart), a short one and a decode step.
            const std::vector<std::vector<int32_t>> prompts = {
                {3, 14, 15, 92, 65, 35, 89}, {27, 18, 28, 18, 28, 45}, {16, 18}, {33}};

            std::vector<std::vector<float>> alone;
            for (const auto& p : prompts) {
                KvCache kv(t.hp.n_layer, 64, t.hp.n_embd_kv());
                std::vector<float> logits;
                t.pool.run([&] { t.fwd.eval(p, kv, logits, false); });
                alone.push_back(logits);
            }

            KvCache kv(t.hp.n_layer, 64, t.hp.n_embd_kv(), 16);
            std::vector<SeqTokens> batch;
            for (size_t i = 0; i < prompts.size(); ++i) {
                const SeqId s = i == 0 ? 0 : kv.create_seq();
                REQUIRE(kv.reserve(s, static_cast<int32_t>(prompts[i].size())));
                batch.push_back({s, prompts[i]});
            }
            std::vector<float> logits;
            t.pool.run([&] { t.fwd.eval_batch(batch, kv, logits); });
            REQUIRE(logits.size() == prompts.size() * V);
            for (size_t i = 0; i < prompts.size(); ++i) {
                INFO("sequence " << i << " of " << prompts[i].size() << " tokens");
                CHECK(std::memcmp(&logits[i * V], alone[i].data(), V * sizeof(float)) == 0);
            }
        }
    }
}

TEST_CASE("moe: the routing counts add up to the tokens run times the experts used", "[unit][moe]") {
    test::TinyForward t("moe_stats.gguf", moe_config("qwen3moe"), 5);
    KvCache kv(t.hp.n_layer, 64, t.hp.n_embd_kv());
    const std::vector<int32_t> ids = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    t.prompt_then_steps(ids, 5, kv);
    const RoutingStats* stats = t.fwd.routing_stats();
    REQUIRE(stats);
    const auto counts = stats->snapshot();
    REQUIRE(counts.size() == static_cast<size_t>(t.hp.n_layer));
    for (const auto& layer : counts) {
        REQUIRE(layer.size() == static_cast<size_t>(t.hp.moe.n_expert));
        CHECK(std::accumulate(layer.begin(), layer.end(), uint64_t{0}) == ids.size() * t.hp.moe.n_expert_used);
        // Each token picks distinct experts: no expert is chosen more often than there are tokens.
        for (uint64_t c : layer) CHECK(c <= ids.size());
    }
}

TEST_CASE("moe: a dense model has no routing counts", "[unit][moe]") {
    test::TinyForward t("dense_stats.gguf", test::tiny_config("llama", 64, 2, 96), 5);
    CHECK(t.fwd.routing_stats() == nullptr);
}
