// A mixture of experts (and qwen3's QK-norm) on the simulated device: attention, its norms and
// the KV cache on the device, each layer's feed-forward on the host (runtime/exec/device/device_moe.cpp).
// The simulated device's ops are the CPU kernels in the same row groups, so the logits must be
// the CPU forward pass's bit for bit, with the experts resident in DRAM or read from the file
// through the expert cache.
#include <catch2/catch.hpp>

#include <cstring>
#include <tuple>

#include "gpu/device.h"
#include "runtime/exec/device/device_backend.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/weights/expert_cache.h"
#include "runtime/weights/weight_store.h"
#include "storage/budget.h"
#include "tests/support/fixtures.h"
#include "tests/support/tiny_engine.h"
#include "tests/support/tiny_model.h"

using namespace strata;
using namespace strata::runtime;

namespace {

nlohmann::json config(const std::string& arch, int n_expert, int n_ff_shexp) {
    auto c = test::tiny_config(arch, 64, 3, 96);
    if (n_expert) {
        c["n_expert"] = n_expert;
        c["n_expert_used"] = 3;
        c["n_ff_exp"] = 256;
    }
    c["qk_norm"] = arch == "qwen3moe" || arch == "qwen3";
    c["weight_type"] = "Q8_0";
    if (n_ff_shexp) c["n_ff_shexp"] = n_ff_shexp;
    return c;
}

constexpr int kCtx = 64;

// Logits of `ids` (the first n_prompt as one pass, then one token a pass) on the simulated
// device over `store`, the KV cache where `kv_at` says, `experts` (per layer) held there.
std::vector<float> on_sim_device(const test::TinyModelFile& m, WeightStore& store, std::span<const int32_t> ids,
                                 size_t n_prompt, KvPlacement kv_at = KvPlacement::Device,
                                 const std::vector<std::vector<int32_t>>& experts = {}) {
    return test::sim_device_logits(m, store, ids, n_prompt, kCtx, kv_at, experts);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("sim device: a mixture of experts gives the CPU's logits, experts resident or cached", "[unit][device][experts]") {
    for (const auto& [arch, n_expert, shexp] : {std::tuple{"qwen3moe", 8, 0}, {"llama", 8, 64}}) {
        SECTION(std::string(arch) + (shexp ? " with shared experts" : "")) {
            test::TinyCpuModel all(std::string("device_moe_") + arch + ".gguf", config(arch, n_expert, shexp), 31);
            const std::vector<int32_t> ids{3, 14, 15, 92, 65, 35, 89, 79, 32, 38, 46, 26};
            KvCache kv_cpu(all.hp.n_layer, kCtx, all.hp.n_embd_kv());
            const std::vector<float> want = all.prompt_then_steps(ids, 5, kv_cpu);

            // Every expert resident in DRAM; the KV cache on the device, or in DRAM with the CPU attending.
            CHECK(same_bits(on_sim_device(all, all.store, ids, 5), want));
            CHECK(same_bits(on_sim_device(all, all.store, ids, 5, KvPlacement::HostCpuAttention), want));

            // Every layer's experts read from the file through a cache of one layer's experts.
            const test::SmallExpertCache small(all);
            REQUIRE(small.plan.enabled);
            storage::MemoryBudget budget("DRAM", small.in.budget, "--dram");
            WeightStore cached(all.file, all.hp, budget, small.residency);
            REQUIRE(cached.expert_cache());
            CHECK(same_bits(on_sim_device(all, cached, ids, 5), want));
            CHECK(cached.expert_cache()->stats().misses > 0);
        }
    }
}

TEST_CASE("sim device: qwen3's per-head QK-norm gives the CPU's logits", "[unit][device]") {
    test::TinyCpuModel all("device_qwen3.gguf", config("qwen3", 0, 0), 37);
    REQUIRE(all.hp.arch == models::Arch::Qwen3);
    REQUIRE(all.store.weights().layers[0].q_norm);
    const std::vector<int32_t> ids{7, 1, 44, 90, 12, 5, 61, 23};
    KvCache kv_cpu(all.hp.n_layer, kCtx, all.hp.n_embd_kv());
    const std::vector<float> want = all.prompt_then_steps(ids, 4, kv_cpu);
    CHECK(same_bits(on_sim_device(all, all.store, ids, 4), want));
}

TEST_CASE("sim device: experts held on the device give the CPU's logits", "[unit][device][experts]") {
    for (const char* type : {"Q8_0", "IQ4_NL"}) {
        SECTION(type) {
            auto c = config("qwen3moe", 8, 0);
            c["weight_type"] = type;
            test::TinyCpuModel all(std::string("device_experts_") + type + ".gguf", c, 41);
            const std::vector<int32_t> ids{3, 14, 15, 92, 65, 35, 89, 79, 32, 38, 46, 26};
            KvCache kv_cpu(all.hp.n_layer, kCtx, all.hp.n_embd_kv());
            const std::vector<float> want = all.prompt_then_steps(ids, 5, kv_cpu);
            // Some experts of each layer on the device (every one of the last layer), the rest on the host.
            const std::vector<std::vector<int32_t>> held{{0, 2, 5}, {7}, {0, 1, 2, 3, 4, 5, 6, 7}};
            REQUIRE(static_cast<int>(held.size()) == all.hp.n_layer);
            CHECK(same_bits(on_sim_device(all, all.store, ids, 5, KvPlacement::Device, held), want));
            CHECK(same_bits(on_sim_device(all, all.store, ids, 5, KvPlacement::HostCpuAttention, held), want));
            // The host's experts read through a small cache meanwhile: the device's are never read into it.
            const test::SmallExpertCache small(all);
            storage::MemoryBudget budget("DRAM", small.in.budget, "--dram");
            WeightStore cached(all.file, all.hp, budget, small.residency);
            REQUIRE(cached.expert_cache());
            CHECK(same_bits(on_sim_device(all, cached, ids, 5, KvPlacement::Device, held), want));
            CHECK(cached.expert_cache()->stats().hits + cached.expert_cache()->stats().misses > 0);
        }
    }
}

TEST_CASE("sim device: gpt-oss's biased MXFP4 experts and deepseek2's held on the device give the CPU's logits",
          "[unit][device][experts]") {
    const auto fx = test::model_fixture("tiny_arch_logits.json");
    for (const auto& model : fx["models"]) {
        const std::string name = model["config"]["name"];
        if (name != "gpt-oss" && name != "deepseek2") continue;
        SECTION(name) {
            test::TinyCpuModel all("device_experts_" + name + ".gguf", test::with_q8_0(model["config"]), fx["seed"]);
            const std::vector<int32_t> ids{3, 14, 15, 92, 65, 35, 89, 79, 32, 38, 46, 26};
            KvCache kv_cpu(all.hp.n_layer, kCtx, all.hp.n_embd_kv());
            const std::vector<float> want = all.prompt_then_steps(ids, 5, kv_cpu);
            // Half of each expert layer's experts held on the device (none of deepseek2's dense first layer's).
            std::vector<std::vector<int32_t>> held(size_t(all.hp.n_layer));
            for (int il = 0; il < all.hp.n_layer; ++il)
                if (all.hp.moe.in_layer(il))
                    for (int e = 0; e < all.hp.moe.n_expert; e += 2) held[size_t(il)].push_back(e);
            CHECK(same_bits(on_sim_device(all, all.store, ids, 5, KvPlacement::Device, held), want));
        }
    }
}
