// The mixture-of-experts feed-forward beyond the reference's logits (test_architectures.cpp):
// rows grouped by expert give every sequence of a batch the bits it gets alone, and the
// routing counts add up to the tokens run times the experts each uses.
#include <catch2/catch.hpp>

#include <cstring>
#include <numeric>

#include "cpu/thread_pool.h"
#include "runtime/exec/cpu/cpu_backend.h"
#include "runtime/exec/routing_stats.h"
#include "runtime/weights/weight_store.h"
#include "storage/budget.h"
#include "tests/support/planned.h"
#include "tests/support/skip.h"
#include "runtime/kv/kv_cache.h"
#include "tests/support/tiny_engine.h"
#include "tests/support/tiny_model.h"

using namespace strata;
using namespace strata::runtime;

namespace {
nlohmann::json moe_config(const std::string& arch, const std::string& type = "F32") {
    auto c = test::tiny_config(arch, 64, 2, 96);
    c["n_expert"] = 8;
    c["n_expert_used"] = 3;
    c["n_ff_exp"] = 32;
    c["qk_norm"] = arch == "qwen3moe";
    c["weight_type"] = type;
    return c;
}

std::vector<float> logits_of(test::TinyModelFile& m, runtime::WeightStore& store, std::span<const int32_t> ids) {
    runtime::CpuBackend backend(m.hp, store);
    KvCache kv(m.hp.n_layer, 64, m.hp.n_embd_kv());
    cpu::ThreadPool pool(2);
    return test::eval_seq(backend, pool, kv, kv.create_seq(), ids, true);
}
}  // namespace

TEST_CASE("moe: a batch of prompts and decode steps gives each sequence its logits alone", "[unit][moe]") {
    // Float weights run long segments apart; Q8_0 ones share every expert's call.
    for (const auto& [arch, type] : {std::pair{"qwen3moe", "F32"}, {"llama", "F32"}, {"qwen3moe", "Q8_0"}}) {
        SECTION(std::string(arch) + " " + type) {
            test::TinyCpuModel t(std::string("moe_batch_") + arch + type + ".gguf", moe_config(arch, type), 17);
            REQUIRE(t.hp.moe.enabled());
            const int64_t V = t.hp.n_vocab;
            // Two long prompts (their float rows run apart), a short one and a decode step.
            const std::vector<std::vector<int32_t>> prompts = {
                {3, 14, 15, 92, 65, 35, 89}, {27, 18, 28, 18, 28, 45}, {16, 18}, {33}};

            std::vector<std::vector<float>> alone;
            for (const auto& p : prompts) {
                KvCache kv(t.hp.n_layer, 64, t.hp.n_embd_kv());
                alone.push_back(test::eval_seq(t.backend, t.pool, kv, kv.create_seq(), p, false));
            }

            KvCache kv(t.hp.n_layer, 64, t.hp.n_embd_kv(), 16);
            std::vector<SeqTokens> batch;
            for (size_t i = 0; i < prompts.size(); ++i) {
                const SeqId s = kv.create_seq();
                REQUIRE(kv.reserve(s, static_cast<int32_t>(prompts[i].size())));
                batch.push_back({s, prompts[i]});
            }
            std::vector<float> logits;
            t.pool.run([&] { t.backend.eval_batch(batch, kv, logits); });
            REQUIRE(logits.size() == prompts.size() * V);
            for (size_t i = 0; i < prompts.size(); ++i) {
                INFO("sequence " << i << " of " << prompts[i].size() << " tokens");
                CHECK(std::memcmp(&logits[i * V], alone[i].data(), V * sizeof(float)) == 0);
            }
        }
    }
}

TEST_CASE("moe: the routing counts add up to the tokens run times the experts used", "[unit][moe]") {
    test::TinyCpuModel t("moe_stats.gguf", moe_config("qwen3moe"), 5);
    KvCache kv(t.hp.n_layer, 64, t.hp.n_embd_kv());
    const std::vector<int32_t> ids = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    t.prompt_then_steps(ids, 5, kv);
    const RoutingStats* stats = t.backend.routing_stats();
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

TEST_CASE("moe: experts tiled at load, one matrix at a time, give the file layout's logits bit for bit", "[unit][moe]") {
    test::TinyModelFile m("moe_tiled.gguf", moe_config("qwen3moe", "Q8_0"), 23);
    const std::vector<int32_t> ids{5, 9, 33, 2, 71, 8, 8, 40};
    storage::MemoryBudget unlimited("DRAM", UINT64_MAX);
    runtime::WeightStore file_layout(m.file, m.hp, unlimited, test::planned(m.file, m.hp, unlimited));
    runtime::WeightStore tiled(m.file, m.hp, unlimited, test::planned(m.file, m.hp, unlimited));
    cpu::ThreadPool pool(2);
    uint64_t bytes = 0;
    pool.run([&] { bytes = tiled.tile_for_cpu(); });
    if (bytes == 0) STRATA_SKIP("the active kernels have no tiled layout (no AVX-512)");
    REQUIRE(tiled.weights().layers[0].ffn_up_exps.tiled);
    CHECK(logits_of(m, tiled, ids) == logits_of(m, file_layout, ids));
}

TEST_CASE("moe: a dense model has no routing counts", "[unit][moe]") {
    test::TinyCpuModel t("dense_stats.gguf", test::tiny_config("llama", 64, 2, 96), 5);
    CHECK(t.backend.routing_stats() == nullptr);
}

namespace {
// Experts "held elsewhere": computed on the host with the same kernels, their outputs written only
// when collected, so a sum taken before collect() would differ.
class DeferredExperts final : public RemoteExperts {
public:
    DeferredExperts(const models::Hparams& hp, const WeightStore& store, std::vector<int> held)
        : hp_(hp), store_(store), held_(std::move(held)) {}
    bool holds(int, int e) const override { return std::find(held_.begin(), held_.end(), e) != held_.end(); }
    void start(int il, int e, const float* x, int64_t n, int64_t n_long, float* y) override {
        REQUIRE(holds(il, e));
        const LayerWeights& l = store_.weights().layers[static_cast<size_t>(il)];
        const int64_t E = hp_.n_embd, F = hp_.moe.n_ff_exp;
        Job j{y, std::vector<float>(size_t(n * E))};
        std::vector<float> gate(size_t(n * F)), up(size_t(n * F));
        gated_ffn(mm_, hp_, {l.ffn_gate_exps.mat(e), l.ffn_up_exps.mat(e), l.ffn_down_exps.mat(e)}, x, n, n_long,
                  gate.data(), up.data(), j.out.data());
        jobs_.push_back(std::move(j));
        rows += n;
    }
    void collect() override {
        for (const Job& j : jobs_) std::copy(j.out.begin(), j.out.end(), j.y);
        jobs_.clear();
    }
    int64_t rows = 0;

private:
    struct Job {
        float* y;
        std::vector<float> out;
    };
    const models::Hparams& hp_;
    const WeightStore& store_;
    std::vector<int> held_;
    PassMatmul mm_;
    std::vector<Job> jobs_;
};
}  // namespace

TEST_CASE("moe: experts computed elsewhere are summed as the host's own would be", "[unit][moe][experts]") {
    for (const char* type : {"F32", "Q8_0"}) {
        SECTION(type) {
            test::TinyCpuModel t(std::string("moe_remote_") + type + ".gguf", moe_config("qwen3moe", type), 23);
            const std::vector<int32_t> ids{3, 14, 15, 92, 65, 35, 89, 79, 32};
            KvCache kv_all(t.hp.n_layer, 64, t.hp.n_embd_kv());
            const std::vector<float> want = t.prompt_then_steps(ids, 6, kv_all);
            DeferredExperts remote(t.hp, t.store, {1, 4, 6});
            t.backend.set_remote_experts(&remote);
            KvCache kv(t.hp.n_layer, 64, t.hp.n_embd_kv());
            const std::vector<float> got = t.prompt_then_steps(ids, 6, kv);
            t.backend.set_remote_experts(nullptr);
            CHECK(remote.rows > 0);
            REQUIRE(got.size() == want.size());
            CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
        }
    }
}
