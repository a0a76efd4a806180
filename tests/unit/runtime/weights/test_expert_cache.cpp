// Offloaded experts: the forward pass with every routed expert read through a small cache
// gives the logits of the all-resident model bit for bit, from only the chosen experts' bytes.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <cstdlib>
#include <memory>

#include <fmt/format.h>

#include "core/error.h"
#include "cpu/thread_pool.h"
#include "runtime/exec/cpu/cpu_backend.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/place/placement.h"
#include "runtime/weights/expert_cache.h"
#include "runtime/weights/weight_store.h"
#include "storage/budget.h"
#include "tests/support/fixtures.h"
#include "tests/support/tiny_engine.h"
#include "tests/support/tiny_model.h"

using namespace strata;
using namespace strata::runtime;

namespace {

nlohmann::json moe_config(const std::string& arch, const std::string& type, int n_ff_shexp = 0) {
    auto c = test::tiny_config(arch, 64, 3, 96);
    c["n_expert"] = 8;
    c["n_expert_used"] = 3;
    c["n_ff_exp"] = 256;  // experts of several O_DIRECT blocks, as real ones are
    c["qk_norm"] = arch == "qwen3moe";
    c["weight_type"] = type;
    if (n_ff_shexp) c["n_ff_shexp"] = n_ff_shexp;
    return c;
}

}  // namespace

TEST_CASE("offloaded experts: the same logits as resident ones, reading only the chosen experts", "[unit][experts]") {
    for (const auto& [arch, type, shexp] : {std::tuple{"qwen3moe", "Q8_0", 0}, {"qwen3moe", "F32", 0}, {"llama", "Q8_0", 64}}) {
        SECTION(std::string(arch) + " " + type + (shexp ? " shared" : "")) {
            test::TinyCpuModel all(std::string("offload_") + arch + type + ".gguf", moe_config(arch, type, shexp), 23);
            const std::vector<int32_t> ids{3, 14, 15, 92, 65, 35, 89, 79, 32, 38, 46, 26};
            KvCache kv_all(all.hp.n_layer, 64, all.hp.n_embd_kv());
            const std::vector<float> want = all.prompt_then_steps(ids, 5, kv_all);

            const test::SmallExpertCache small(all);
            const ResidencyInput& in = small.in;
            REQUIRE(small.plan.enabled);
            REQUIRE(small.residency.experts.n_slots == 8);
            storage::MemoryBudget budget("DRAM", in.budget, "--dram");
            WeightStore store(all.file, all.hp, budget, small.residency);
            REQUIRE(store.expert_cache());
            // The weights a token reads are the model's, wherever its experts are.
            CHECK(store.weights().total_bytes() == all.store.weights().total_bytes());
            CHECK(store.weights().decode_bytes() == all.store.weights().decode_bytes());
            CpuBackend backend(all.hp, store);
            KvCache kv(all.hp.n_layer, 64, all.hp.n_embd_kv());
            const SeqId seq = kv.create_seq();
            cpu::ThreadPool pool(2);
            std::vector<float> got = test::eval_seq(backend, pool, kv, seq, std::span(ids).first(5), true);
            const ExpertCacheStats after_prompt = store.expert_cache()->stats();
            for (size_t i = 5; i < ids.size(); ++i) {
                const auto step = test::eval_seq(backend, pool, kv, seq, std::span(ids).subspan(i, 1), false);
                got.insert(got.end(), step.begin(), step.end());
            }
            REQUIRE(got.size() == want.size());
            CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);

            const ExpertCacheStats s = store.expert_cache()->stats();
            CHECK(s.misses > 0);
            // A decode step reads at most its 3 chosen experts per layer (each in its aligned
            // file ranges, at most a slot), below what streaming the layers' 8 would read.
            const uint64_t steps = ids.size() - 5, layers = all.hp.n_layer;
            const uint64_t decode_misses = s.misses - after_prompt.misses;
            CHECK(decode_misses <= steps * layers * 3);
            CHECK(s.bytes_read - after_prompt.bytes_read <= decode_misses * in.expert_slot_bytes);
            const uint64_t layer_expert_bytes = all.store.weights().layers[0].ffn_up_exps.bytes() * 3;
            CHECK(s.bytes_read - after_prompt.bytes_read < steps * layers * layer_expert_bytes);
        }
    }
}

TEST_CASE("offloaded experts: a budget below one layer's experts is refused with the minimum", "[unit][experts]") {
    test::TinyModelFile m("offload_small.gguf", moe_config("qwen3moe", "Q8_0"), 5);
    storage::MemoryBudget unlimited("DRAM", UINT64_MAX);
    ResidencyInput in = WeightStore::residency_input(m.file, m.hp, unlimited, 0, 2);
    in.budget = in.fixed_bytes + in.other_bytes;
    for (uint64_t d : in.dense_bytes) in.budget += d;
    PlacementOptions o;
    o.n_ctx = 64;
    o.overrides = {parse_tensor_override("exps=nvme")};
    CHECK_THROWS_WITH(place(m.file, in, o), Catch::Contains("too small to offload the experts") &&
                                                Catch::Contains("a cache of one layer's 8 experts"));
}

TEST_CASE("offloaded experts: a failed read fails its pass, and the next pass is exact", "[unit][experts]") {
    test::TinyCpuModel all("offload_eio.gguf", moe_config("qwen3moe", "Q8_0"), 29);
    const std::vector<int32_t> ids{3, 14, 15, 92, 65, 35};
    std::vector<float> want;
    {
        KvCache kv(all.hp.n_layer, 64, all.hp.n_embd_kv());
        want = test::eval_seq(all.backend, all.pool, kv, kv.create_seq(), ids, true);
    }
    const test::SmallExpertCache small(all);
    // The Nth read fails: past the reads at load, it hits an expert's read in the first pass.
    int hit_in_pass = 0;
    for (int nth = 1; nth < 400 && hit_in_pass < 3; ++nth) {
        INFO("eio:" << nth);
        setenv("STRATA_FAULT_IO", fmt::format("eio:{}", nth).c_str(), 1);
        storage::MemoryBudget budget("DRAM", small.in.budget, "--dram");
        std::unique_ptr<WeightStore> store;
        try {
            store = std::make_unique<WeightStore>(all.file, all.hp, budget, small.residency);
        } catch (const IoError&) {
            unsetenv("STRATA_FAULT_IO");
            continue;  // the fault hit the load
        }
        unsetenv("STRATA_FAULT_IO");
        CpuBackend backend(all.hp, *store);
        std::vector<float> got;
        bool failed = false;
        {
            KvCache kv(all.hp.n_layer, 64, all.hp.n_embd_kv());
            try {
                got = test::eval_seq(backend, all.pool, kv, kv.create_seq(), ids, true);
            } catch (const IoError& e) {
                failed = true;
                CHECK_THAT(e.what(), Catch::Contains("I/O error") || Catch::Contains("EIO") || Catch::Contains("read"));
            }
        }
        if (!failed) break;  // the fault is past the first pass: every later nth is too
        ++hit_in_pass;
        KvCache kv(all.hp.n_layer, 64, all.hp.n_embd_kv());
        got = test::eval_seq(backend, all.pool, kv, kv.create_seq(), ids, true);
        REQUIRE(got.size() == want.size());
        CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
    }
    CHECK(hit_in_pass == 3);
}

TEST_CASE("offloaded experts: deepseek2 (a dense first layer) and gpt-oss (MXFP4, biased experts) give the resident logits",
          "[unit][experts]") {
    const auto fx = test::model_fixture("tiny_arch_logits.json");
    for (const auto& model : fx["models"]) {
        const std::string name = model["config"]["name"];
        if (name != "deepseek2" && name != "gpt-oss") continue;
        SECTION(name) {
            test::TinyCpuModel all("offload_" + name + ".gguf", model["config"], fx["seed"]);
            const std::vector<int32_t> ids{3, 14, 15, 92, 65, 35, 89, 79, 32, 38, 46, 26};
            KvCache kv_all(all.hp.n_layer, 64, all.hp.n_embd_kv());
            const std::vector<float> want = all.prompt_then_steps(ids, 5, kv_all);
            const test::SmallExpertCache small(all);
            storage::MemoryBudget budget("DRAM", small.in.budget, "--dram");
            WeightStore store(all.file, all.hp, budget, small.residency);
            REQUIRE(store.expert_cache());
            CpuBackend backend(all.hp, store);
            KvCache kv(all.hp.n_layer, 64, all.hp.n_embd_kv());
            cpu::ThreadPool pool(2);
            const std::vector<float> got = test::prompt_then_steps(backend, pool, ids, 5, kv);
            REQUIRE(got.size() == want.size());
            CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
            CHECK(store.expert_cache()->stats().misses > 0);
        }
    }
}
