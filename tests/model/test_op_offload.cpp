// Prefill with op offload on the simulated device (SmolLM2, and every dense architecture's tiny model): a prompt's passes copy the plan's
// CPU layers to the device and compute them there, their K/V stored in DRAM (the device
// attending over the blocks copied in), while decode keeps them on the CPU. Since the simulated device's ops are the CPU
// kernels in the same row groups, the prompt's logits and the greedy tokens that follow equal,
// bit for bit, those of the same plan with op offload off (and of the CPU engine), whether the
// CPU layers lie in DRAM or are streamed from NVMe and wherever the device's own layers keep
// their KV, with the CPU's resident layers in its kernels' tiles throughout where they tile (the
// device's copies are read from the file). The trace shows which passes ran the CPU layers on the CPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cpu/cpu_features.h"
#include "planner/plan.h"
#include "runtime/engine.h"
#include "runtime/place/placement.h"
#include "runtime/weights/weight_store.h"
#include "tests/support/fixtures.h"
#include "tests/support/device_plans.h"
#include "tests/support/engine_options.h"
#include "tests/support/generate.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/greedy.h"
#include "tests/support/memory_loss.h"
#include "tests/support/model_paths.h"
#include "tests/support/tiny_model.h"
#include "tests/support/trace_file.h"

using namespace strata;
using namespace strata::runtime;
using KvOption = planner::KvOption;
using WeightOption = planner::WeightOption;

namespace {

const char* const kText =
    "A lighthouse keeper kept a log of every ship that passed the point: its flag, its cargo when he could "
    "tell, the weather and the hour. ";

EngineOptions options(const std::filesystem::path& model, OpOffloadMode::Kind offload, AttentionChoice attention) {
    EngineOptions eo;
    eo.model = model;
    eo.n_ctx = 1024;
    eo.gpu.device = DeviceKind::Sim;
    eo.gpu.attention = attention;
    eo.gpu.gpu_mem = uint64_t{1} << 30;
    eo.gpu.sim_link_gbps = 50;
    eo.gpu.op_offload = {offload};
    return eo;
}

// Of every four layers: one on the device, one copied in from DRAM each pass, and two whose
// matmuls the CPU runs (from DRAM, or streamed from NVMe where `streamed`); KV on the device or
// in DRAM with attention on either side.
planner::Plan with_cpu_layers(planner::Plan p, bool streamed, KvOption kv, bool cpu_attention) {
    const WeightOption cpu = streamed ? WeightOption::NvmeCpu : WeightOption::DramCpu;
    const WeightOption cycle[] = {WeightOption::Gpu, cpu, cpu, WeightOption::DramToGpu};
    for (auto& l : p.layers) {
        l.weights = cycle[l.layer % 4];
        l.kv = kv;
        l.attention = cpu_attention ? planner::Device::Cpu : planner::Device::Gpu;
    }
    p.policy.cpu_attention = cpu_attention;
    p.policy.recompute = false;
    return p;
}

std::vector<int32_t> long_prompt(const Engine& e) {
    // Longer than one pass (Backend::kMaxUbatch), so that the second pass attends to the first's KV.
    std::vector<int32_t> prompt;
    while (prompt.size() < 300) {
        const auto more = e.tokenizer().encode(kText, prompt.empty(), false);
        prompt.insert(prompt.end(), more.begin(), more.end());
    }
    return prompt;
}

// A long prompt, and the CPU engine's 16 greedy tokens after it: what every device run gives.
std::pair<std::vector<int32_t>, std::vector<int32_t>> cpu_reference(const std::filesystem::path& path) {
    EngineOptions c = options(path, OpOffloadMode::Off, AttentionChoice::Auto);
    c.gpu.device = DeviceKind::Cpu;
    Engine cpu(c);
    std::vector<int32_t> prompt = long_prompt(cpu);
    std::vector<int32_t> want = test::generate(cpu, prompt, test::greedy(16, true)).tokens;
    return {std::move(prompt), std::move(want)};
}

// Slices on the trace's "cpu: layers" track: the CPU layers the CPU ran beside the device.
size_t cpu_layer_slices(const std::filesystem::path& trace) {
    const std::vector<test::TraceSlice> slices = test::read_trace(trace);
    return std::count_if(slices.begin(), slices.end(), [](const test::TraceSlice& s) { return s.track == "cpu: layers"; });
}

// The CPU's resident layers (at least one) each hold their matrices as its kernels read them:
// in their tiles on the AVX-512 path (those of a type the kernels tile), in the file's layout on
// the others, which have no tiles.
bool cpu_layers_as_kernels_read(const Engine& e) {
    const bool tiles = cpu::active_path() == cpu::CpuPath::Avx512;
    const WeightStore& store = e.weights();
    int n = 0;
    for (int il = 0; il < static_cast<int>(store.weights().layers.size()); ++il) {
        if (!store.residency().cpu(il) || !store.residency().resident[il]) continue;
        ++n;
        const LayerWeights& l = store.weights().layers[il];
        if (std::any_of(std::begin(LayerWeights::kMatrices), std::end(LayerWeights::kMatrices),
                        [&](auto m) { return (l.*m).tiled; }) != tiles)
            return false;
    }
    return n > 0;
}

struct Run {
    std::vector<float> logits;   // the prompt's, teacher-forced
    std::vector<int32_t> tokens;  // greedy, after the prompt
    size_t cpu_layers_in_prompt = 0;
    bool as_kernels_read = false;  // cpu_layers_as_kernels_read after the prompt
};

Run run(EngineOptions o, const planner::Plan& plan, const std::filesystem::path& trace) {
    o.plan = plan;
    o.trace_path = trace;
    Run r;
    {
        Engine e(o);
        const auto prompt = long_prompt(e);
        r.logits = test::prompt_logits(e, prompt);
        r.as_kernels_read = cpu_layers_as_kernels_read(e);
    }
    r.cpu_layers_in_prompt = cpu_layer_slices(trace);
    o.trace_path.clear();
    Engine e(o);
    r.tokens = test::generate(e, long_prompt(e), test::greedy(16, true)).tokens;
    return r;
}

void offload_gives_the_same_results(bool streamed, KvOption kv, bool cpu_attention) {
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    const AttentionChoice attention = cpu_attention ? AttentionChoice::Cpu : AttentionChoice::Gpu;
    const planner::Plan plan = with_cpu_layers(test::plan_made_for(options(*path, OpOffloadMode::Off, attention)), streamed, kv, cpu_attention);
    const Run off = run(options(*path, OpOffloadMode::Off, attention), plan, test::temp_path("op_offload_off.json"));
    const Run on = run(options(*path, OpOffloadMode::On, attention), plan, test::temp_path("op_offload_on.json"));
    // Off: every CPU layer ran on the CPU in each of the prompt's two passes; on: none did.
    const size_t n_cpu = size_t(std::count_if(plan.layers.begin(), plan.layers.end(),
                                              [](const auto& l) { return planner::device_of(l.weights) == planner::Device::Cpu; }));
    CHECK(off.cpu_layers_in_prompt == 2 * n_cpu);
    CHECK(on.cpu_layers_in_prompt == 0);
    REQUIRE(on.logits.size() == off.logits.size());
    CHECK(std::equal(on.logits.begin(), on.logits.end(), off.logits.begin()));
    CHECK(on.tokens == off.tokens);
    if (!streamed) CHECK((on.as_kernels_read && off.as_kernels_read));
}

}  // namespace

TEST_CASE("sim device: op offload gives the logits and tokens of CPU layers run on the CPU", "[model][device][op_offload]") {
    SECTION("KV on the device") { offload_gives_the_same_results(false, KvOption::Gpu, false); }
    SECTION("KV in DRAM, CPU attention") { offload_gives_the_same_results(false, KvOption::Dram, true); }
    SECTION("KV in DRAM, device attention") { offload_gives_the_same_results(false, KvOption::Dram, false); }
}

TEST_CASE("sim device: op offload of CPU layers streamed from NVMe gives the same results", "[model][device][op_offload]") {
    offload_gives_the_same_results(true, KvOption::Gpu, false);
}

TEST_CASE("sim device: decode after op-offloaded prefill, on CPU layers as its kernels read them, gives the CPU engine's tokens", "[model][device][op_offload]") {
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    EngineOptions o = options(*path, OpOffloadMode::On, AttentionChoice::Gpu);
    o.plan = with_cpu_layers(test::plan_made_for(o), false, KvOption::Gpu, false);
    Engine dev(o);
    CHECK(cpu_layers_as_kernels_read(dev));
    EngineOptions c = options(*path, OpOffloadMode::Off, AttentionChoice::Auto);
    c.gpu.device = DeviceKind::Cpu;
    Engine cpu(c);
    const auto prompt = long_prompt(cpu);
    CHECK(test::generate(dev, prompt, test::greedy(16, true)).tokens == test::generate(cpu, prompt, test::greedy(16, true)).tokens);
}

// Device memory taken away between the prompt's two passes, under op offload: op offload stops
// (its staging pair goes first: with the KV cache on the device, the CPU layers' blocks came up
// into a pair of its own), layers move to the CPU with their KV cache, the second pass prefills
// the CPU layers there, and the tokens are the CPU engine's.
TEST_CASE("sim device: memory taken away mid-prompt under op offload gives the CPU engine's tokens", "[model][device][op_offload]") {
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    const auto [prompt, want] = cpu_reference(*path);
    for (const KvOption kv : {KvOption::Gpu, KvOption::Dram}) {
        INFO((kv == KvOption::Gpu ? "KV on the device" : "KV in DRAM"));
        EngineOptions o = options(*path, OpOffloadMode::On, AttentionChoice::Gpu);
        o.plan = with_cpu_layers(test::plan_made_for(o), false, kv, false);
        uint64_t used = 0;
        {
            Engine e(o);
            used = e.gauges().gpu_used;
            CHECK(e.weights().as_read_bytes() > 0);  // the CPU layers read again for the device
        }
        // After the first pass, 6 MiB less than the run holds: more than op offload's staging pair.
        Engine e(test::shrinking(o, 1, used - (uint64_t{6} << 20)));
        CHECK(test::generate(e, prompt, test::greedy(16, true)).tokens == want);
        test::check_layers_moved(e.gauges());
        CHECK(e.weights().as_read_bytes() == 0);  // op offload stopped: its pinned buffers went back
    }
}

// CPU layers whose KV the host rebuilds from the hidden states it saves (recompute) stay on the
// CPU in an op-offloaded prompt pass: the device's pass would not save those states.
TEST_CASE("sim device: op offload beside CPU layers that recompute their KV gives the CPU engine's tokens", "[model][device][op_offload]") {
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    const auto [prompt, want] = cpu_reference(*path);
    EngineOptions o = options(*path, OpOffloadMode::On, AttentionChoice::Gpu);
    planner::Plan p = with_cpu_layers(test::plan_made_for(o), false, KvOption::Gpu, false);
    p.policy.recompute = true;
    int n_rebuilt = 0;
    for (auto& l : p.layers)
        if (planner::device_of(l.weights) == planner::Device::Cpu && l.layer % 8 == 1) l.kv = KvOption::ActGpu, ++n_rebuilt;
    o.plan = p;
    Engine e(o);
    REQUIRE(e.kv_cache().n_rebuilt() == n_rebuilt);
    CHECK(test::generate(e, prompt, test::greedy(16, true)).tokens == want);
    // Every CPU layer rebuilt: nothing is left to offload, and op offload takes no device memory.
    for (auto& l : p.layers)
        if (planner::device_of(l.weights) == planner::Device::Cpu) l.kv = KvOption::ActGpu;
    o.plan = p;
    uint64_t with_offload = 0;
    {
        Engine all(o);
        with_offload = all.gauges().gpu_used;
        CHECK(test::generate(all, prompt, test::greedy(16, true)).tokens == want);
    }
    o.gpu.op_offload = {OpOffloadMode::Off};
    CHECK(Engine(o).gauges().gpu_used == with_offload);
}

// Every dense architecture's tiny model (Q8_0 matrices, whose rows have the same bits in any
// batch on the CPU and the simulated device; deepseek2's with every layer dense), four layers of
// which the middle two are the CPU's, the KV cache on the device or in DRAM (the device attending
// to it): op offload computes the CPU
// layers on the device in the prompt's pass (their K/V in DRAM, the device attending over the
// blocks copied up: latent attention's key rows alone) and gives the prompt's logits of the same
// plan with op offload off, bit for bit. (A mixture of experts' device plan has no CPU layers: the
// device runs every layer's attention, its experts as the expert plan says.)
TEST_CASE("sim device: op offload of every dense architecture gives the logits of its CPU layers run on the CPU",
          "[model][device][op_offload][arch]") {
    const auto fx = test::model_fixture("tiny_arch_logits.json");
    int n_archs = 0;
    bool latent = false;
    for (const auto& m : fx["models"]) {
        nlohmann::json config = test::with_vocabulary(test::with_q8_0(m["config"]));
        config["n_layer"] = 4;
        if (config["arch"] == "deepseek2") {
            if (latent) continue;  // one is enough
            config["extra_u32"]["leading_dense_block_count"] = 4;
            latent = true;
        } else if (config.value("n_expert", 0) > 0) {
            continue;
        }
        const std::string name = config["name"];
        INFO(name);
        const auto path = test::temp_path("op_offload_" + name + ".gguf");
        test::write_tiny_model(config, 7, 1e-5f, path);
        EngineOptions o = options(path, OpOffloadMode::Off, AttentionChoice::Gpu);
        o.n_ctx = 128;
        const planner::Plan made = test::all_on_device(test::plan_of(o));
        // Past a decode pass's rows, so that the pass is a prompt's that op offload takes.
        std::vector<int32_t> prompt;
        for (int i = 0; i < 8; ++i) prompt.insert(prompt.end(), {1, 403, 407, 261, 378, 432});
        for (const KvOption kv : {KvOption::Gpu, KvOption::Dram}) {
            INFO((kv == KvOption::Gpu ? "KV on the device" : "KV in DRAM"));
            o.plan = made;
            for (auto& l : o.plan->layers) l.kv = kv;
            for (const int il : {1, 2}) o.plan->layers[size_t(il)].weights = WeightOption::DramCpu;
            std::vector<float> logits[2];
            size_t cpu_layers[2] = {};
            for (const bool offload : {false, true}) {
                o.gpu.op_offload = {offload ? OpOffloadMode::On : OpOffloadMode::Off};
                o.trace_path = test::temp_path("op_offload_" + name + ".json");
                {
                    Engine e(o);
                    logits[offload] = test::prompt_logits(e, prompt);
                }
                cpu_layers[offload] = cpu_layer_slices(o.trace_path);
            }
            CHECK(cpu_layers[0] == 2);  // the two CPU layers ran there in the prompt's one pass
            CHECK(cpu_layers[1] == 0);  // and on the device under op offload
            REQUIRE(logits[1].size() == logits[0].size());
            CHECK(std::equal(logits[1].begin(), logits[1].end(), logits[0].begin()));
        }
        ++n_archs;
    }
    CHECK(latent);
    CHECK(n_archs >= 11);
}
