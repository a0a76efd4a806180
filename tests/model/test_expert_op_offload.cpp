// Op offload of a mixture of experts on the simulated device: with every layer's attention on
// the device and the routed experts on the host, a prompt's pass copies each layer (its experts
// in DRAM, in the CPU kernels' tiles) to the device as the file lays it out and computes every
// routed expert the pass chose there (but those of a layer whose experts it holds whole), the
// router and shared experts staying on the host. Since
// the simulated device's ops are the CPU kernels in the same row groups (Q8_0 experts, and
// gpt-oss's MXFP4), the prompt's logits equal, bit for bit, those with op offload off, where the
// host computed every expert; the device's count of op offload's routed choices says it computed
// each of the prompt's (with those of the layer it holds whole), and none of a decode step's.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/kernel_shapes.h"
#include "runtime/engine.h"
#include "runtime/place/placement.h"
#include "runtime/weights/weight_store.h"
#include "tests/support/engine_options.h"
#include "tests/support/fixtures.h"
#include "tests/support/generate.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/greedy.h"
#include "tests/support/memory_loss.h"
#include "tests/support/model_paths.h"
#include "tests/support/tiny_model.h"
#include "tests/support/trace_file.h"

using namespace strata;
using namespace strata::runtime;

namespace {

// Routed choices (a token's, to one expert) the device computed: by the experts it holds, and
// by op offload.
struct Choices {
    uint64_t held = 0, offloaded = 0;
};
Choices choices(const Engine& e) { return {e.gauges().gpu_expert_choices, e.gauges().gpu_offloaded_expert_choices}; }

struct Run {
    std::vector<float> logits;  // the prompt's, teacher-forced
    Choices prompt;             // in the prompt's pass
    Choices after_decode;       // and after four greedy decode steps
    std::vector<int32_t> tokens;  // those steps' tokens
    int n_moe_layers = 0;
};

Run run(const EngineOptions& o, const std::vector<int32_t>& prompt) {
    Run r;
    {
        Engine e(o);
        r.logits = test::prompt_logits(e, prompt);
        r.prompt = choices(e);
        for (const LayerWeights& l : e.weights().weights().layers) r.n_moe_layers += bool(l.ffn_gate_exps);
    }
    Engine e(o);
    r.tokens = test::generate(e, prompt, test::greedy(4, true)).tokens;
    r.after_decode = choices(e);
    return r;
}

// The tiny qwen3moe of 4 layers.
nlohmann::json tiny_qwen3moe() {
    const nlohmann::json fx = test::model_fixture("tiny_arch_logits.json");
    nlohmann::json config;
    for (const auto& m : fx["models"])
        if (m["config"]["name"] == "qwen3moe") config = test::with_vocabulary(test::with_q8_0(m["config"]));
    REQUIRE(config.is_object());
    config["n_layer"] = 4;
    return config;
}

// `config` on the simulated device, every routed expert in DRAM (written to temp_path(name)), a
// context of 512.
EngineOptions experts_on_host(const nlohmann::json& config, const std::string& name) {
    const auto path = test::temp_path(name);
    test::write_tiny_model(config, 7, 1e-5f, path);
    EngineOptions o = test::sim_engine_options(path, 512);
    o.overrides = {parse_tensor_override("exps=dram")};
    return o;
}

// A prompt of n tokens, a phrase repeated.
std::vector<int32_t> repeated_prompt(size_t n) {
    std::vector<int32_t> prompt;
    while (prompt.size() < n) prompt.insert(prompt.end(), {1, 403, 407, 261, 378, 432});
    prompt.resize(n);
    return prompt;
}

// The prompt's logits with op offload off: every routed expert computed by the host.
std::vector<float> logits_offload_off(EngineOptions o, const std::vector<int32_t>& prompt) {
    o.gpu.op_offload = {OpOffloadMode::Off};
    Engine e(o);
    return test::prompt_logits(e, prompt);
}

}  // namespace

TEST_CASE("sim device: op offload of a mixture of experts computes the prompt's routed experts on the device, with the "
          "logits of the host's",
          "[model][device][op_offload][experts][arch]") {
    const nlohmann::json fx = test::model_fixture("tiny_arch_logits.json");
    // Past a decode pass's rows, so that the pass is a prompt's that op offload takes.
    const std::vector<int32_t> prompt = repeated_prompt(48);
    int n_archs = 0;
    for (const auto& m : fx["models"]) {
        if (m["config"].value("n_expert", 0) == 0) continue;
        nlohmann::json config = test::with_vocabulary(test::with_q8_0(m["config"]));
        config["n_layer"] = 4;
        const std::string name = config["name"];
        INFO(name);
        const auto path = test::temp_path("expert_op_offload_" + name + ".gguf");
        test::write_tiny_model(config, 7, 1e-5f, path);
        EngineOptions o = test::sim_engine_options(path, 128);
        const int k = config["n_expert_used"];
        // Every routed expert on the host, or layer 1's held whole by the device (which then
        // copies in the others only, computing layer 1's from what it holds, decode steps too).
        for (const bool held : {false, true}) {
            INFO((held ? "layer 1's experts held on the device" : "every expert on the host"));
            o.overrides = {parse_tensor_override("exps=dram")};
            if (held) o.overrides.insert(o.overrides.begin(), parse_tensor_override("blk\\.1\\.ffn_.*_exps=device"));
            o.gpu.op_offload = {OpOffloadMode::Off};
            const Run off = run(o, prompt);
            o.gpu.op_offload = {OpOffloadMode::On};
            const Run on = run(o, prompt);
            CHECK(off.prompt.offloaded == 0);
            CHECK((off.prompt.held > 0) == held);
            CHECK(on.prompt.held == off.prompt.held);  // layer 1's, held whole
            CHECK(on.prompt.held + on.prompt.offloaded == prompt.size() * size_t(k) * size_t(on.n_moe_layers));
            CHECK(on.after_decode.offloaded == on.prompt.offloaded);  // decode steps' experts: the host's, or held
            CHECK((on.after_decode.held > on.prompt.held) == held);
            REQUIRE(on.logits.size() == off.logits.size());
            CHECK(std::equal(on.logits.begin(), on.logits.end(), off.logits.begin()));
            CHECK(on.tokens == off.tokens);
        }
        ++n_archs;
    }
    CHECK(n_archs >= 5);
}

// The host rebuilds each layer it copies in (from the CPU's tiles) while it waits for the
// device's experts of the layer before, not between the layers where the device has nothing to
// do: on the trace, layer k's rebuild lies within the host's work on layer k-1's experts, and the
// first layer's before any. A pass of 192 rows whose tokens choose 12 of 16 experts gives the
// device more choices than its scratch's 2048 rows (kDeviceExpertRows): the rebuild runs at the
// first fill's wait, amid the host's queuing, with the logits of op offload off.
TEST_CASE("sim device: a mixture's op offload rebuilds each layer while the device computes the experts of the one "
          "before",
          "[model][device][op_offload][experts]") {
    nlohmann::json config = tiny_qwen3moe();
    config["n_expert"] = 16, config["n_expert_used"] = 12;
    REQUIRE(192 * config["n_expert_used"].get<int>() > kDeviceExpertRows);
    EngineOptions o = experts_on_host(config, "expert_op_offload_overlap.gguf");
    const std::vector<int32_t> prompt = repeated_prompt(192);
    const std::vector<float> want = logits_offload_off(o, prompt);
    o.gpu.op_offload = {OpOffloadMode::On};
    o.trace_path = test::temp_path("expert_op_offload_overlap.json");
    int n_layer = 0;
    {
        Engine e(o);
        n_layer = static_cast<int>(e.weights().weights().layers.size());
        const std::vector<float> got = test::prompt_logits(e, prompt);
        REQUIRE(got.size() == want.size());
        CHECK(std::equal(got.begin(), got.end(), want.begin()));
        CHECK(e.gauges().gpu_offloaded_expert_choices == prompt.size() * config["n_expert_used"].get<size_t>() * size_t(n_layer));
    }
    std::map<int, test::TraceSlice> rebuilt, experts;  // by layer: its (first) slice of each
    for (const test::TraceSlice& s : test::read_trace(o.trace_path)) {
        int il = -1;
        if (s.track == "op offload: layers rebuilt from DRAM" && std::sscanf(s.name.c_str(), "layer %d as in", &il) == 1)
            rebuilt.emplace(il, s);
        if (s.track == "cpu: layers" && s.name.ends_with(" experts") && std::sscanf(s.name.c_str(), "layer %d", &il) == 1)
            experts.emplace(il, s);
    }
    REQUIRE(static_cast<int>(rebuilt.size()) == n_layer);
    REQUIRE(static_cast<int>(experts.size()) == n_layer);
    constexpr double kRounding = 0.01;  // microseconds: a slice's end is written as begin + duration
    CHECK(rebuilt.at(0).end_us <= experts.at(0).begin_us + kRounding);
    for (int il = 1; il < n_layer; ++il) {
        INFO("layer " << il);
        CHECK(rebuilt.at(il).begin_us >= experts.at(il - 1).begin_us - kRounding);
        CHECK(rebuilt.at(il).end_us <= experts.at(il - 1).end_us + kRounding);
    }
}

// Device memory taken away after the first of a prompt's two passes under op offload: op offload
// stops (its slots go first, which is enough here), the second pass's experts are the host's, the
// logits are those with op offload off, and the running plan is priced without it.
TEST_CASE("sim device: memory taken away mid-prompt stops a mixture of experts' op offload, same logits",
          "[model][device][op_offload][experts]") {
    const nlohmann::json config = tiny_qwen3moe();
    EngineOptions o = experts_on_host(config, "expert_op_offload_loss.gguf");
    // Two passes: 256 rows, then 44 (still a prompt's run, past a decode pass's rows).
    const std::vector<int32_t> prompt = repeated_prompt(300);
    const std::vector<float> want = logits_offload_off(o, prompt);
    o.gpu.op_offload = {OpOffloadMode::On};
    uint64_t used = 0;
    {
        Engine e(o);
        used = e.gauges().gpu_used;
        CHECK(e.weights().as_read_bytes() > 0);
    }
    Engine e(test::shrinking(o, 1, used - 1));
    const std::vector<float> got = test::prompt_logits(e, prompt);
    REQUIRE(got.size() == want.size());
    CHECK(std::equal(got.begin(), got.end(), want.begin()));
    const TierGauges g = e.gauges();
    CHECK(g.gpu_memory_losses == 1);
    CHECK(g.gpu_experts_given_back == 0);
    CHECK(g.gpu_offloaded_expert_choices == 256u * uint64_t(config["n_expert_used"].get<int>()) * 4u);  // the first pass's
    CHECK(e.weights().as_read_bytes() == 0);  // its pinned buffers went back
    CHECK(e.running_placement()->op_offload_rows == 0);
}

// A DRAM budget whose room the layout counted for op offload's rebuild buffer, but which the
// run's other buffers took first: the backend cannot set it up and says so, and the engine's plan
// is the one without it (its prediction, its reason), never one claiming what does not run.
TEST_CASE("sim device: op offload the backend cannot set up is planned and priced as off", "[model][device][op_offload][experts]") {
    EngineOptions o = experts_on_host(tiny_qwen3moe(), "expert_op_offload_not_set_up.gguf");
    int not_set_up = 0, set_up = 0;
    for (uint64_t kib = 12 << 10; kib >= 6 << 10; kib -= 256) {
        o.dram_budget = kib << 10;
        INFO("--dram " << kib << " KiB");
        o.gpu.op_offload = {OpOffloadMode::On};
        std::optional<Engine> on;
        try {
            on.emplace(o);
        } catch (const OutOfBudget&) {
            break;  // the budget holds no run
        }
        // Planned where it runs, and only there: its pinned buffers are what it runs through.
        const bool runs = on->weights().as_read_bytes() > 0;
        CHECK((on->placement().op_offload_rows > 0) == runs);
        if (runs) {
            ++set_up;
            continue;
        }
        ++not_set_up;
        CHECK(on->placement().op_offload_why == "not set up on the device (see the warning above)");
        CHECK(on->placement().plan.experts.op_offload_rows == 0);
        o.gpu.op_offload = {OpOffloadMode::Off};
        const Engine off(o);
        CHECK(on->placement().plan.prediction.ttft_s == Approx(off.placement().plan.prediction.ttft_s));
        CHECK(on->placement().plan.prediction.used.gpu == Approx(off.placement().plan.prediction.used.gpu));
    }
    CHECK(set_up > 0);
    CHECK(not_set_up > 0);
}

// A device that holds some of a layer's experts (the most chosen, in the memory op offload's
// slots leave) and copies the layer in for a prompt's pass: the experts it holds are computed
// from its own copy and counted as held, the others from the slot as op offload's, each of the
// prompt's choices once; the logits are the host's.
TEST_CASE("sim device: a layer partly held on the device and copied in for a prompt's pass computes its held experts "
          "from its own copy",
          "[model][device][op_offload][experts]") {
    // Experts of 0.8 MB, whose arithmetic outweighs a device's launches and hops.
    nlohmann::json config = tiny_qwen3moe();
    config["n_embd"] = 512, config["n_ff"] = 512, config["n_ff_exp"] = 512;
    const auto path = test::temp_path("expert_op_offload_partly_held.gguf");
    test::write_tiny_model(config, 7, 1e-5f, path);
    EngineOptions o = test::sim_engine_options(path, 512);
    // A host of one thread beside a device of as many as the machine has beside it (up to 16).
    o.gpu.sim_threads = 16;
    o.n_threads = 1;
    const std::vector<int32_t> prompt = repeated_prompt(48);
    const int k = config["n_expert_used"], n_expert = config["n_expert"];
    // Device memory from room for every expert (32 of 0.8 MB) and op offload's two slots (of
    // 7.2 MiB) down until none is held beside the slots.
    int partly = 0;
    for (uint64_t mem = 64ull << 20; mem > (4ull << 20) && partly < 2; mem -= 512ull << 10) {
        o.gpu.gpu_mem = mem;
        INFO("--gpu-mem " << mem);
        o.gpu.op_offload = {OpOffloadMode::On};
        planner::ExpertPlan experts;
        try {
            experts = test::plan_made_for(o).experts;
        } catch (const OutOfBudget&) {
            break;
        }
        if (experts.op_offload_rows == 0) continue;
        const bool some = std::any_of(experts.device.begin(), experts.device.end(), [&](const auto& held) {
            return !held.empty() && static_cast<int>(held.size()) < n_expert;
        });
        if (!some) continue;
        ++partly;
        const Run on = run(o, prompt);
        // Its slots set up but the prompt's pass too short for them: the same experts held, every
        // choice of theirs counted as held, the others the host's.
        o.gpu.op_offload = {OpOffloadMode::Rows, 200};
        REQUIRE(test::plan_made_for(o).experts.device == experts.device);
        const Run slots_idle = run(o, prompt);
        o.gpu.op_offload = {OpOffloadMode::Off};
        const Run off = run(o, prompt);
        CHECK(slots_idle.prompt.offloaded == 0);
        CHECK(slots_idle.prompt.held > 0);
        CHECK(on.prompt.held == slots_idle.prompt.held);
        CHECK(on.prompt.offloaded > 0);
        CHECK(on.prompt.held + on.prompt.offloaded == prompt.size() * size_t(k) * size_t(on.n_moe_layers));
        CHECK(on.after_decode.offloaded == on.prompt.offloaded);
        REQUIRE(on.logits.size() == off.logits.size());
        CHECK(std::equal(on.logits.begin(), on.logits.end(), off.logits.begin()));
        CHECK(on.tokens == off.tokens);
    }
    CHECK(partly > 0);
}

// With the KV cache in DRAM the device still stages one layer of it for a prompt's attention: a
// --gpu-mem that holds the attention but not that layer is refused, saying so, where it used to
// lay the run out and leave the device when the backend could not allocate the layer.
TEST_CASE("sim device: a mixture's device memory too small for the staged KV layer is refused, saying so",
          "[model][device][experts]") {
    // Keys and values of 256 values a position: a layer of 32 MiB at 32768 positions, past the
    // 16 MiB the device's working set keeps spare.
    nlohmann::json config = tiny_qwen3moe();
    config["n_embd"] = 256, config["n_head_kv"] = 4;
    EngineOptions o = experts_on_host(config, "expert_staged_kv_room.gguf");
    o.overrides.clear();
    o.n_ctx = 32768;
    o.gpu.attention = AttentionChoice::Cpu;
    int refused_for_the_layer = 0;
    for (uint64_t mem = 160ull << 20; mem >= (2ull << 20); mem -= 2ull << 20) {
        o.gpu.gpu_mem = mem;
        INFO("--gpu-mem " << mem);
        try {
            const Engine e(o);
            CHECK(e.backend_name() != "cpu");  // laid out on the device: it runs there
        } catch (const OutOfBudget& err) {
            const std::string what = err.what();
            refused_for_the_layer += what.find("the layer of the KV cache a prompt's pass stages") != std::string::npos;
            if (what.find("the attention weights, the output head and activations take") != std::string::npos) break;
        }
    }
    CHECK(refused_for_the_layer > 0);
}
