// Every architecture's layer program on the simulated device: the tiny model of each
// architecture in tests/fixtures/model/tiny_arch_logits.json (test::with_q8_0: a row's matmul
// has the same bits in any batch) gives the CPU backend's logits bit for bit, since the
// simulated device's ops are the CPU kernels: with the KV cache on the device, in DRAM with the
// CPU attending or copied in per layer, and with layers kept on the device, copied in each pass
// and computed by the CPU in one run. gpt-oss's MXFP4 experts run on the host; deepseek2's latent
// attention (its per-head products, its latent normed inside the cache row) on the device.
#include <catch2/catch.hpp>

#include <cstring>

#include "runtime/place/kv_placement.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/weights/weight_store.h"
#include "storage/budget.h"
#include "tests/support/fixtures.h"
#include "tests/support/tiny_engine.h"
#include "tests/support/tiny_model.h"

using namespace strata;
using namespace strata::runtime;

namespace {

constexpr int kCtx = 64;

// Where the layers go: all kept on the device, or by turns kept there, copied in from DRAM each
// pass and computed by the CPU.
enum class Sites { Device, Mixed };

std::vector<float> on_sim_device(test::TinyCpuModel& m, std::span<const int32_t> ids, size_t n_prompt, KvPlacement kv_at,
                                 Sites sites) {
    Residency r = m.store.residency();
    r.on_device.assign(m.hp.n_layer, false);
    r.on_cpu.assign(m.hp.n_layer, false);
    for (int il = 0; il < m.hp.n_layer; ++il) {
        const int site = sites == Sites::Device ? 0 : il % 3;
        r.on_device[il] = site == 0;
        r.on_cpu[il] = site == 2;
    }
    storage::MemoryBudget dram("DRAM", UINT64_MAX);
    WeightStore store(m.file, m.hp, dram, r);
    return test::sim_device_logits(m, store, ids, n_prompt, kCtx, kv_at);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("sim device: every architecture's layer program gives the CPU's logits", "[unit][device][arch]") {
    const auto fx = test::model_fixture("tiny_arch_logits.json");
    // A prompt long enough to slide past gemma's window of 4, then single-token steps.
    const std::vector<int32_t> ids{3, 14, 15, 92, 65, 35, 89, 79, 32, 38, 46, 26, 43, 38, 32, 79};
    for (const auto& model : fx["models"]) {
        const auto config = test::with_q8_0(model["config"]);
        const std::string name = config["name"];
        SECTION(name) {
            test::TinyCpuModel m("sim_arch_" + name + ".gguf", config, fx["seed"]);
            KvCache kv_cpu(m.hp.n_layer, kCtx, m.hp.n_embd_kv());
            const std::vector<float> want = m.prompt_then_steps(ids, 10, kv_cpu);
            for (const KvPlacement kv_at : {KvPlacement::Device, KvPlacement::HostCpuAttention, KvPlacement::HostGpuAttention}) {
                INFO(name << ", KV cache: " << kv_placement_name(kv_at));
                // Latent attention has no host-CPU attention for a device: refused, saying so.
                if (m.hp.mla.enabled() && kv_at == KvPlacement::HostCpuAttention)
                    CHECK_THROWS_WITH(on_sim_device(m, ids, 10, kv_at, Sites::Device),
                                      Catch::Contains("latent attention") && Catch::Contains("host CPU"));
                else
                    CHECK(same_bits(on_sim_device(m, ids, 10, kv_at, Sites::Device), want));
            }
            // A mixture of experts keeps every layer's steps but its experts on the device.
            if (!m.hp.moe.enabled()) {
                INFO(name << ": layers on the device, copied in and on the CPU");
                CHECK(same_bits(on_sim_device(m, ids, 10, KvPlacement::Device, Sites::Mixed), want));
            }
        }
    }
}

TEST_CASE("sim device: decode steps held on the device run as one captured graph, with the steps' own logits",
          "[unit][device]") {
    const auto fx = test::model_fixture("tiny_arch_logits.json");
    const std::vector<int32_t> ids{3, 14, 15, 92, 65, 35, 89, 79, 32, 38, 46, 26, 43, 38, 32, 79};
    const size_t n_prompt = 10;  // then 6 single-token steps: the second and later launch the graph
    for (const auto& model : fx["models"]) {
        const auto config = test::with_q8_0(model["config"]);
        const std::string name = config["name"];
        test::TinyCpuModel m("sim_graph_" + name + ".gguf", config, fx["seed"]);
        if (m.hp.moe.enabled()) continue;  // its experts run on the host mid-pass: no graph
        INFO(name);
        storage::MemoryBudget dram("DRAM", UINT64_MAX);
        Residency r = m.store.residency();
        r.on_device.assign(m.hp.n_layer, true);
        r.on_cpu.assign(m.hp.n_layer, false);
        WeightStore store(m.file, m.hp, dram, r);
        uint64_t launches = 0, none = 0;
        const auto graphed = test::sim_device_logits(m, store, ids, n_prompt, kCtx, KvPlacement::Device, {}, true, &launches);
        const auto op_by_op = test::sim_device_logits(m, store, ids, n_prompt, kCtx, KvPlacement::Device, {}, false, &none);
        CHECK(launches == ids.size() - n_prompt - 1);
        CHECK(none == 0);
        CHECK(same_bits(graphed, op_by_op));
    }
}
