// The planner's count of a layer's device ops in a decode step (ModelShape::device_decode_ops,
// read from the file's tensor table) against the ops the device backend issues: each
// architecture's tiny model on the simulated device, every layer and its KV cache there (a mixture
// of experts: every layer's attention, its experts on the host, or every one held on the device),
// or every layer's K and V recomputed there; the ops of a decode pass counted in the trace with
// one layer more and without, and those beyond the layers.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "planner/model_shape.h"
#include "runtime/engine.h"
#include "tests/support/device_plans.h"
#include "tests/support/engine_options.h"
#include "tests/support/fixtures.h"
#include "tests/support/generate.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/greedy.h"
#include "tests/support/tiny_model.h"

using namespace strata;
using namespace strata::runtime;

namespace {

// The simulated device's compute ops in each pass, up to the copy of its logits to the host
// (which the compute stream makes); a graph's launch, a slice around its ops, is not one.
std::vector<int> ops_per_pass(const std::filesystem::path& trace_path) {
    std::ifstream in(trace_path);
    const nlohmann::json trace = nlohmann::json::parse(in);
    int compute = -1;
    for (const auto& ev : trace["traceEvents"])
        if (ev["ph"] == "M" && ev["args"]["name"] == "sim: compute") compute = ev["tid"];
    std::vector<std::pair<double, std::string>> ops;
    for (const auto& ev : trace["traceEvents"])
        if (ev["ph"] == "X" && ev["tid"] == compute && ev["name"] != "graph") ops.emplace_back(ev["ts"], ev["name"]);
    std::sort(ops.begin(), ops.end());
    std::vector<int> passes;
    int n = 0;
    for (const auto& [ts, name] : ops) {
        if (name != "copy to host") {
            ++n;
            continue;
        }
        passes.push_back(n);
        n = 0;
    }
    return passes;
}

struct Counted {
    std::vector<int> passes;
    // ModelShape::device_decode_ops of the last layer and of all, with each expert a token
    // chooses making its device_expert_ops where the experts are held on the device.
    int last_layer = 0, layers = 0;
};

// How the layers run: as the plan says, with every routed expert held on the device, or with
// every layer's K and V recomputed on the device from saved hidden states.
enum class Mode { Plain, ExpertsHeld, Recomputed };

Counted count_ops(nlohmann::json config, int n_layer, const std::string& name, Mode mode = Mode::Plain) {
    config["n_layer"] = n_layer;
    const auto path = test::temp_path("op_count_" + name + ".gguf");
    test::write_tiny_model(config, 7, 1e-5f, path);
    EngineOptions o = test::sim_engine_options(path, 128);
    o.gpu.attention = AttentionChoice::Gpu;
    // A mixture of experts runs its experts by the CPU's plan, every layer's attention on the device.
    if (config.value("n_expert", 0) == 0) o.plan = test::all_on_device(test::plan_of(o));
    if (mode == Mode::ExpertsHeld) o.overrides = {parse_tensor_override("ffn_.*_exps=device")};
    if (mode == Mode::Recomputed) {
        planner::Plan p = o.plan ? *o.plan : test::plan_of(o);
        p.policy.recompute = true;
        for (planner::LayerPlacement& l : p.layers) l.kv = planner::KvOption::ActGpu;
        o.plan = p;
    }
    o.trace_path = test::temp_path("op_count_" + name + ".json");
    {
        Engine e(o);
        // Long enough that a decode step rebuilds a chunk of more than 16 rows, as deep ones do.
        std::vector<int32_t> prompt;
        for (int i = 0; i < 7; ++i) prompt.insert(prompt.end(), {1, 403, 407, 261, 378, 432});
        runtime::SpecOptions plain;
        plain.mode = SpecMode::Off;
        REQUIRE(test::generate(e, prompt, test::greedy(4, true), plain).tokens.size() == 4);
    }
    const planner::ModelShape shape = planner::ModelShape::from_gguf(path);
    // A decode step's one token runs n_expert_used experts a layer; a recomputing layer rebuilds
    // the 42 to 44 positions before the step in one chunk.
    auto ops = [&](const planner::LayerShape& l) {
        return planner::ModelShape::device_decode_ops(l) + (mode == Mode::ExpertsHeld ? shape.n_expert_used * l.device_expert_ops : 0) +
               (mode == Mode::Recomputed ? 2 + l.rebuild_ops : 0);
    };
    int layers = 0;
    for (const planner::LayerShape& l : shape.layers) layers += ops(l);
    return {ops_per_pass(o.trace_path), ops(shape.layers.back()), layers};
}

// The passes of `fewer` and `more` layers (one more) against the planner's counts.
void check_counts(const Counted& fewer, const Counted& more, bool softcap) {
    INFO("ops per pass: " << nlohmann::json(fewer.passes).dump() << ", with one layer more: "
                          << nlohmann::json(more.passes).dump());
    // The prompt's pass and three decode passes, the decode passes alike.
    REQUIRE(fewer.passes.size() == 4);
    REQUIRE(more.passes.size() == 4);
    CHECK(fewer.passes[1] == fewer.passes[3]);
    CHECK(more.passes[1] == more.passes[3]);
    CHECK(more.passes[1] - fewer.passes[1] == more.last_layer);
    // Beyond its layers a decode pass makes the head's product, the output norm taken into it
    // (and gemma2's soft-cap of the logits).
    CHECK(fewer.passes[1] - fewer.layers == 1 + int(softcap));
}

// Each fixture model that `takes` (by its config), counted in `mode` with one layer more and
// without against the planner; `also` checks more of the count with one layer more. Returns how
// many models ran.
int check_models(Mode mode, const std::function<bool(const nlohmann::json&)>& takes,
                 const std::function<void(const nlohmann::json&, const Counted&)>& also = {}) {
    const auto fx = test::model_fixture("tiny_arch_logits.json");
    const char* suffix[] = {"", "_held", "_rebuilt"};
    int archs = 0;
    for (const auto& m : fx["models"]) {
        const auto config = test::with_vocabulary(test::with_q8_0(m["config"]));
        if (!takes(config)) continue;
        const std::string name = config["name"].get<std::string>() + suffix[int(mode)];
        INFO(name);
        const int n_layer = config["n_layer"];
        const Counted more = count_ops(config, n_layer + 1, name, mode);
        check_counts(count_ops(config, n_layer, name, mode), more, config.contains("final_softcap"));
        if (also) also(config, more);
        ++archs;
    }
    return archs;
}

bool mixture(const nlohmann::json& config) { return config.value("n_expert", 0) > 0; }

}  // namespace

TEST_CASE("sim device: a layer's decode ops are the planner's count, in every architecture", "[model][device][arch]") {
    CHECK(check_models(Mode::Plain, [](const nlohmann::json&) { return true; }) ==
          int(test::model_fixture("tiny_arch_logits.json")["models"].size()));
}

TEST_CASE("sim device: the ops of experts held on the device are the planner's count", "[model][device][arch][experts]") {
    // The held experts made ops: the count is not the one with every expert on the host.
    const int archs = check_models(Mode::ExpertsHeld, mixture, [](const nlohmann::json& config, const Counted& more) {
        CHECK(more.last_layer > count_ops(config, config["n_layer"].get<int>() + 1, config["name"]).last_layer);
    });
    CHECK(archs >= 3);  // qwen3moe, gpt-oss and deepseek2 at least
}

TEST_CASE("sim device: the ops of a layer whose KV is recomputed are the planner's count", "[model][device][arch]") {
    // A mixture of experts runs by the CPU's plan, which recomputes nothing.
    CHECK(check_models(Mode::Recomputed, [](const nlohmann::json& c) { return !mixture(c); }) >= 10);
}
