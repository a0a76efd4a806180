// The device backend on the real SmolLM2 model, in every mode a device plan can take: every
// layer on the device, layers copied in each pass from DRAM or streamed from NVMe, layers whose
// matmuls run on the CPU (from DRAM or streamed from NVMe), attention on
// the CPU over a KV cache in DRAM (FastDecode/NEO), KV copied in per layer, KV recomputed from
// saved hidden states (KVPR/HCache). On the simulated device (always) a run gives exactly the
// CPU engine's tokens, since its ops are the CPU kernels in the same row groups; on a CUDA GPU
// (label `gpu`, skipped without one) every mode gives the tokens of its all-on-device run, and
// teacher-forced top-1 agrees with the CPU on 99% of positions. Every architecture's tiny model
// runs through the engine on the device too.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "planner/plan.h"
#include "runtime/engine.h"
#include "runtime/place/placement.h"
#include "runtime/scheduler.h"
#include "runtime/weights/weight_store.h"
#include "tests/support/depth_batch.h"
#include "tests/support/device_plans.h"
#include "tests/support/fixtures.h"
#include "tests/support/generate.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/greedy.h"
#include "tests/support/memory_loss.h"
#include "tests/support/model_paths.h"
#include "tests/support/tiny_model.h"
#include "tests/unit/gpu/cuda_test_support.h"

using namespace strata;
using namespace strata::runtime;
using namespace strata::test;
using planner::KvOption;
using planner::WeightOption;

namespace {

const char* const kText =
    "The history of the river town begins with a ferry crossing, a mill and a road that followed the water "
    "north. Over two centuries the mill became a factory, the ferry a bridge, and the road a railway line "
    "that carried grain, timber and later machines to the cities on the coast.";

EngineOptions options(const std::filesystem::path& model, DeviceKind device, AttentionChoice attention = AttentionChoice::Auto) {
    EngineOptions eo;
    eo.model = model;
    eo.n_ctx = 512;
    eo.gpu.device = device;
    eo.gpu.attention = attention;
    eo.gpu.gpu_mem = uint64_t{1} << 30;
    eo.gpu.sim_link_gbps = 50;  // the modes, not the link, are under test
    return eo;
}

int argmax(std::span<const float> row) { return int(std::max_element(row.begin(), row.end()) - row.begin()); }

std::vector<int32_t> greedy_tokens(Engine& e, int n) {
    return test::generate(e, e.tokenizer().encode(kText, true, false), test::greedy(n, true)).tokens;
}

void modes_give_the_same_tokens(DeviceKind device) {
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    const int n = 24;
    const planner::Plan made = plan_of(options(*path, device, AttentionChoice::Gpu));
    EngineOptions all = options(*path, device, AttentionChoice::Gpu);
    all.plan = all_on_device(made);
    Engine resident(all);
    REQUIRE(resident.backend_name() != "cpu");
    const auto on_device = resident.placement().residency.on_device;
    REQUIRE(std::all_of(on_device.begin(), on_device.end(), [](bool b) { return b; }));
    const auto expected = greedy_tokens(resident, n);
    if (device == DeviceKind::Sim) {
        Engine cpu(options(*path, DeviceKind::Cpu));
        CHECK(greedy_tokens(cpu, n) == expected);
    }
    EngineOptions cpu_attention = options(*path, device, AttentionChoice::Cpu);
    cpu_attention.plan = all_on_device(made);
    Engine e(cpu_attention);
    CHECK(greedy_tokens(e, n) == expected);

    for (bool cpu_attention : {false, true}) {
        INFO("layers copied in and streamed, " << (cpu_attention ? "CPU" : "GPU") << " attention over KV in DRAM");
        EngineOptions o = options(*path, device, cpu_attention ? AttentionChoice::Cpu : AttentionChoice::Gpu);
        o.plan = heterogeneous(made, cpu_attention);
        Engine e(o);
        CHECK(e.placement().residency.n_streamed() > 0);
        CHECK(greedy_tokens(e, n) == expected);
    }
}

// The device ops of a run's trace, by name.
std::map<std::string, int> traced_ops(const std::filesystem::path& trace_path) {
    std::ifstream in(trace_path);
    const nlohmann::json trace = nlohmann::json::parse(in);
    std::map<std::string, int> ops;
    for (const auto& ev : trace["traceEvents"])
        if (ev["ph"] == "X") ++ops[ev["name"].get<std::string>()];
    return ops;
}

// With every layer's KV cache on the device, each layer of each pass (the prompt's and every
// decode step's) rotates q and k and stores K and V in one op, after its attention's input is
// ready and before attention reads it: the trace holds one rope_qkv_store an attention op (a
// layer's), and no separate rope or kv_store. With the KV cache on the host (the CPU attending),
// each device layer rotates q and k in one op, and no rope is left either.
void queries_keys_values_in_one_op(DeviceKind device) {
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    EngineOptions o = options(*path, device, AttentionChoice::Gpu);
    const planner::Plan made = plan_of(o);
    o.plan = all_on_device(made);
    o.trace_path = test::temp_path("qkv_one_op.json");
    int n_layer = 0;
    std::vector<int32_t> tokens;
    {
        Engine e(o);
        n_layer = e.hparams().n_layer;
        tokens = greedy_tokens(e, 6);
        CHECK(tokens.size() == 6);
        if (device == DeviceKind::Sim) {
            Engine cpu(options(*path, DeviceKind::Cpu));
            CHECK(greedy_tokens(cpu, 6) == tokens);
        }
    }
    std::map<std::string, int> ops = traced_ops(o.trace_path);
    INFO("ops: " << nlohmann::json(ops).dump());
    CHECK(ops["rope_qkv_store"] >= n_layer);
    CHECK(ops["rope_qkv_store"] % n_layer == 0);
    CHECK(ops["rope"] == 0);
    CHECK(ops["kv_store"] == 0);
    // CUDA traces a captured decode step as one graph; the simulated device traces every op.
    if (device == DeviceKind::Sim) {
        CHECK(ops["rope_qkv_store"] >= 6 * n_layer);  // the prompt and five decode steps at least
        CHECK(ops["rope_qkv_store"] == ops["decode_attention"]);
    }

    EngineOptions host = options(*path, device, AttentionChoice::Cpu);
    host.plan = heterogeneous(made, true);
    host.trace_path = test::temp_path("qk_one_op.json");
    {
        Engine e(host);
        CHECK(greedy_tokens(e, 6) == tokens);
    }
    ops = traced_ops(host.trace_path);
    INFO("ops with the KV cache on the host: " << nlohmann::json(ops).dump());
    CHECK(ops["rope_qkv_store"] > 0);
    CHECK(ops["rope"] == 0);
}

void recompute_gives_the_same_tokens(DeviceKind device) {
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    EngineOptions o = options(*path, device, AttentionChoice::Gpu);
    o.kv_type = DType::F32;  // hidden states and K/V kept exactly: only the matmuls' rounding differs
    planner::Plan recompute = all_on_device(plan_of(o));
    o.plan = recompute;
    Engine stored(o);
    // Longer than one pass, so that the second pass attends to rebuilt positions too.
    std::vector<int32_t> prompt;
    while (prompt.size() < 300) {
        const auto more = stored.tokenizer().encode(kText, prompt.empty(), false);
        prompt.insert(prompt.end(), more.begin(), more.end());
    }
    const auto expected = test::generate(stored, prompt, test::greedy(24, true)).tokens;
    recompute.policy.recompute = true;
    for (auto& l : recompute.layers)
        if (l.layer % 2 == 1) l.kv = KvOption::ActGpu;
    o.plan = recompute;
    Engine rebuilt(o);
    REQUIRE(rebuilt.kv_cache().n_rebuilt() == rebuilt.hparams().n_layer / 2);
    CHECK(test::generate(rebuilt, prompt, test::greedy(24, true)).tokens == expected);
}

// Teacher-forced logits of a prompt: equal to the CPU engine's on the simulated device, the same
// top-1 on 99% of positions on CUDA.
// The simulated device runs the CPU's kernels: the same bits where it takes the same paths
// (`same_bits`), else float rounding apart.
void logits_match_the_cpu(DeviceKind device, const std::filesystem::path& path, bool same_bits = true) {
    Engine cpu(options(path, DeviceKind::Cpu));
    EngineOptions o = options(path, device, AttentionChoice::Gpu);
    o.plan = all_on_device(plan_of(o));
    Engine dev(o);
    const auto tokens = cpu.tokenizer().encode(kText, true, false);
    const int64_t V = cpu.hparams().n_vocab;
    const std::vector<float> ref = test::prompt_logits(cpu, tokens);
    const std::vector<float> got_all = test::prompt_logits(dev, tokens);
    const std::span<const float> got = got_all;
    int agree = 0;
    for (size_t t = 0; t < tokens.size(); ++t)
        agree += argmax(std::span(ref).subspan(t * V, V)) == argmax(got.subspan(t * V, V));
    INFO(agree << " of " << tokens.size() << " positions agree");
    CHECK(agree >= 0.99 * double(tokens.size()));
    if (device != DeviceKind::Sim) return;
    if (same_bits) {
        CHECK(std::equal(ref.begin(), ref.end(), got.begin()));
        return;
    }
    // Within float rounding of the CPU's sums: 1e-6 of the row's largest logit.
    int64_t off = 0;
    for (size_t t = 0; t < tokens.size(); ++t) {
        const auto row = std::span(ref).subspan(t * V, V);
        const float scale = std::abs(*std::max_element(row.begin(), row.end(), [](float a, float b) { return std::abs(a) < std::abs(b); }));
        for (int64_t v = 0; v < V; ++v) off += !(std::abs(row[v] - got[t * V + v]) <= 1e-6f * scale);
    }
    CHECK(off == 0);
}

// Random valid plans: each layer's weights anywhere a device plan may put them, KV on the device
// (some layers recomputed from saved hidden states) or in DRAM with attention on either side.
planner::Plan random_plan(planner::Plan p, std::mt19937& rng) {
    const WeightOption weights[] = {WeightOption::Gpu, WeightOption::DramToGpu, WeightOption::NvmeToGpu, WeightOption::DramCpu,
                                    WeightOption::NvmeCpu};
    const bool kv_on_device = rng() % 2;
    const bool cpu_attention = !kv_on_device && rng() % 2;
    p.policy.cpu_attention = cpu_attention;
    p.policy.recompute = false;
    for (auto& l : p.layers) {
        l.weights = weights[rng() % 5];
        const bool recompute = kv_on_device && planner::device_of(l.weights) == planner::Device::Gpu && rng() % 3 == 0;
        p.policy.recompute |= recompute;
        l.kv = kv_on_device ? (recompute ? KvOption::ActGpu : KvOption::Gpu) : KvOption::Dram;
        l.attention = cpu_attention ? planner::Device::Cpu : planner::Device::Gpu;
    }
    return p;
}

// What a device's offloaded and pipelined runs are held to: the CPU engine on the simulated
// device (it runs the CPU's kernels, the same bits), the run with every layer and the KV cache
// on the device on CUDA (its kernels round otherwise than the CPU's). `o`: the device run's options.
EngineOptions reference_options(const EngineOptions& o, const planner::Plan& made) {
    EngineOptions ref = o;
    ref.plan.reset();
    ref.dram_budget = 0;
    if (o.gpu.device == DeviceKind::Sim) {
        ref.gpu.device = DeviceKind::Cpu;
        return ref;
    }
    ref.gpu.attention = AttentionChoice::Gpu;
    ref.plan = all_on_device(made);
    return ref;
}

void random_plans_give_the_reference_tokens(DeviceKind device) {
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    EngineOptions o = options(*path, device);
    o.kv_type = DType::F32;  // recomputed layers then give their K/V exactly
    const planner::Plan made = plan_of(o);
    Engine reference(reference_options(o, made));
    const auto expected = greedy_tokens(reference, 8);
    std::mt19937 rng(2026);
    for (int i = 0; i < 6; ++i) {
        o.plan = random_plan(made, rng);
        INFO("plan " << i << ": " << o.plan->to_json());
        Engine e(o);
        CHECK(greedy_tokens(e, 8) == expected);
    }
}

void spilled_kv_gives_the_reference_tokens(DeviceKind device) {
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    EngineOptions o = options(*path, device, AttentionChoice::Gpu);
    o.n_ctx = 4096;  // 120 MiB of f16 KV: half of it spills under the budget below
    const planner::Plan made = all_on_device(plan_of(o));
    Engine reference(reference_options(o, made));
    std::vector<int32_t> prompt;
    while (prompt.size() < 600) {
        const auto more = reference.tokenizer().encode(kText, prompt.empty(), false);
        prompt.insert(prompt.end(), more.begin(), more.end());
    }
    const auto expected = test::generate(reference, prompt, test::greedy(8, true)).tokens;
    for (AttentionChoice attention : {AttentionChoice::Cpu, AttentionChoice::Gpu}) {
        INFO((attention == AttentionChoice::Cpu ? "CPU" : "device") << " attention");
        EngineOptions spilled = options(*path, device, attention);
        spilled.n_ctx = 4096;
        spilled.plan = made;
        for (auto& l : spilled.plan->layers) l.kv = KvOption::Dram;
        spilled.plan->policy.cpu_attention = attention == AttentionChoice::Cpu;
        spilled.dram_budget = uint64_t{120} << 20;
        Engine e(spilled);
        CHECK(e.kv_cache().n_spilled() > 0);
        CHECK(test::generate(e, prompt, test::greedy(8, true)).tokens == expected);
    }
}

}  // namespace

TEST_CASE("sim device: random valid plans give the CPU engine's greedy tokens", "[model][device]") {
    random_plans_give_the_reference_tokens(DeviceKind::Sim);
}
TEST_CASE("cuda device: random valid plans give the all-on-device run's greedy tokens", "[gpu][model]") {
    STRATA_REQUIRE_CUDA_GPU();
    random_plans_give_the_reference_tokens(DeviceKind::Cuda);
}

TEST_CASE("sim device: a KV cache spilled to disk gives the CPU engine's greedy tokens", "[model][device]") {
    spilled_kv_gives_the_reference_tokens(DeviceKind::Sim);
}
TEST_CASE("cuda device: a KV cache spilled to disk gives the all-on-device run's greedy tokens", "[gpu][model]") {
    STRATA_REQUIRE_CUDA_GPU();
    spilled_kv_gives_the_reference_tokens(DeviceKind::Cuda);
}

namespace {

// Prompts of different lengths (the first n tokens of kText for each n), so that a batch's
// sequences attend at different depths.
std::vector<std::vector<int32_t>> staggered_prompts(const Engine& e, std::initializer_list<size_t> lengths) {
    const auto all = e.tokenizer().encode(kText, true, false);
    std::vector<std::vector<int32_t>> out;
    for (size_t n : lengths) out.emplace_back(all.begin(), all.begin() + std::min(n, all.size()));
    return out;
}

// Each prompt's greedy tokens, the prompts run `max_batch` at a time through the scheduler.
std::vector<std::vector<int32_t>> batched_tokens(Engine& e, const std::vector<std::vector<int32_t>>& prompts, int max_batch,
                                                 int n) {
    std::vector<GenerateResult> results(prompts.size());
    Scheduler sched(e, {max_batch, 64});
    for (size_t i = 0; i < prompts.size(); ++i) {
        Request r;
        r.prompt = prompts[i];
        r.params = test::greedy(n, true);
        r.on_done = [&results, i](const GenerateResult& g) { results[i] = g; };
        sched.submit(std::move(r));
    }
    sched.wait_idle();
    std::vector<std::vector<int32_t>> tokens;
    for (const auto& r : results) tokens.push_back(r.tokens);
    return tokens;
}

void overlapped_batches_give_the_reference_tokens(DeviceKind device) {
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    const int n = 12;
    EngineOptions o = options(*path, device, AttentionChoice::Cpu);
    o.kv_positions = 2048;
    const planner::Plan made = plan_of(o);
    Engine reference(reference_options(o, made));
    const auto prompts = staggered_prompts(reference, {9, 40, 17, 55, 26});
    std::vector<std::vector<int32_t>> want;
    for (const auto& p : prompts) want.push_back(test::generate(reference, p, test::greedy(n, true)).tokens);
    for (bool mixed : {false, true}) {
        for (int max_batch : {1, 3, 5}) {
            INFO((mixed ? "layers on the device, copied in, streamed and on the CPU" : "every layer on the device")
                 << "; batches of " << max_batch);
            o.plan = mixed ? heterogeneous(made, true) : all_on_device(made);
            o.trace_path = test::temp_path("cpu_attention_overlap.json");
            {
                Engine e(o);
                CHECK(batched_tokens(e, prompts, max_batch, n) == want);
            }
            std::ifstream in(o.trace_path);
            const std::string trace((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
            CHECK((trace.find("\"layer 1 B\"") != std::string::npos) == (max_batch > 1));
            if (max_batch == 1) CHECK(trace.find("\"layer 1\"") != std::string::npos);  // one sub-batch
        }
    }
}

}  // namespace

// NEO's pipeline: a batch is cut in two sub-batches, the CPU attends to one while the device runs
// the other's matmuls (prompts attend on the device). Odd batches of sequences at different
// depths give each sequence's tokens alone; the trace shows the CPU's attention per sub-batch
// (one, unnamed, for a batch of 1).
TEST_CASE("sim device: batches with the CPU's attention overlapped give each sequence's CPU tokens", "[model][device]") {
    overlapped_batches_give_the_reference_tokens(DeviceKind::Sim);
}
TEST_CASE("cuda device: batches with the CPU's attention overlapped give each sequence's all-on-device tokens", "[gpu][model]") {
    STRATA_REQUIRE_CUDA_GPU();
    overlapped_batches_give_the_reference_tokens(DeviceKind::Cuda);
}

// `strata bench -d` with a batch: one prefill of the depth, every sequence with its own copy of
// its blocks, in the device's cache (Backend::copy_blocks) or in DRAM copied in per layer.
TEST_CASE("sim device: a batch at one depth from one prefill gives each sequence's CPU tokens", "[model][device]") {
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    const int n = 8;
    Engine cpu(options(*path, DeviceKind::Cpu));
    const std::vector<int32_t> depth = staggered_prompts(cpu, {40})[0];
    const std::vector<std::vector<int32_t>> tails{cpu.tokenizer().encode(" river", false, false),
                                                  cpu.tokenizer().encode(" mill", false, false),
                                                  cpu.tokenizer().encode(" road north", false, false)};
    std::vector<std::vector<int32_t>> want;
    for (const auto& tail : tails) {
        auto prompt = depth;
        prompt.insert(prompt.end(), tail.begin(), tail.end());
        want.push_back(test::generate(cpu, prompt, test::greedy(n, true)).tokens);
    }
    const planner::Plan made = plan_of(options(*path, DeviceKind::Sim, AttentionChoice::Gpu));
    for (bool kv_on_device : {true, false}) {
        INFO((kv_on_device ? "KV on the device" : "KV in DRAM, copied in"));
        EngineOptions o = options(*path, DeviceKind::Sim, AttentionChoice::Gpu);
        o.kv_positions = 1024;
        o.plan = all_on_device(made);
        if (!kv_on_device)
            for (auto& l : o.plan->layers) l.kv = KvOption::Dram;
        Engine e(o);
        const test::DepthBatch got = test::after_one_fill(e, depth, tails, n, true);
        CHECK(got.max_holders == 1);
        for (size_t i = 0; i < tails.size(); ++i) {
            INFO("sequence " << i);
            CHECK(got.results[i].tokens == want[i]);
        }
    }
}

TEST_CASE("sim device: every mode gives the CPU engine's greedy tokens", "[model][device]") {
    modes_give_the_same_tokens(DeviceKind::Sim);
}
TEST_CASE("sim device: a layer's RoPE and K/V stores are one op in every pass, its RoPE alone with the KV cache on the host",
          "[model][device]") {
    queries_keys_values_in_one_op(DeviceKind::Sim);
}
TEST_CASE("sim device: KV recomputed from saved hidden states gives the same tokens", "[model][device]") {
    recompute_gives_the_same_tokens(DeviceKind::Sim);
}

TEST_CASE("sim device: the device's plan recomputes KV only with every layer's KV on the device", "[model][device]") {
    // The device backend rebuilds KV from hidden states only with the whole cache on the device;
    // a plan recomputing some layers beside KV in DRAM ran without recomputation, unlike its price.
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    for (AttentionChoice attention : {AttentionChoice::Gpu, AttentionChoice::Auto}) {
        EngineOptions o = options(*path, DeviceKind::Sim, attention);
        o.n_prompt = 6, o.n_predict = 8;  // a short request, as `generate -p ... -n 8` plans it
        o.gpu.sim_link_gbps = GpuRequest{}.sim_link_gbps;
        const planner::Plan plan = plan_of(o);
        const std::vector<bool> rebuilt = rebuilt_layers(plan);
        INFO("attention " << int(attention));
        CHECK((std::find(rebuilt.begin(), rebuilt.end(), true) == rebuilt.end() || kv_placement_of(plan) == KvPlacement::Device));
    }
}

TEST_CASE("sim device: teacher-forced logits equal the CPU engine's", "[model][device]") {
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    logits_match_the_cpu(DeviceKind::Sim, *path);
}
TEST_CASE("sim device: teacher-forced logits of the tiny llama equal the CPU engine's", "[model][device]") {
    // Its float weights' products are summed in another order on the simulated device than in
    // the CPU engine: the logits differ in their last bits from the first position on.
    logits_match_the_cpu(DeviceKind::Sim, test::tiny_llama_path(), false);
}
TEST_CASE("cuda device: every mode gives the tokens of the all-on-device run", "[gpu][model]") {
    STRATA_REQUIRE_CUDA_GPU();
    modes_give_the_same_tokens(DeviceKind::Cuda);
}
TEST_CASE("cuda device: a layer's RoPE and K/V stores are one op in every pass, its RoPE alone with the KV cache on the host",
          "[gpu][model]") {
    STRATA_REQUIRE_CUDA_GPU();
    queries_keys_values_in_one_op(DeviceKind::Cuda);
}
TEST_CASE("cuda device: KV recomputed on the device from saved hidden states gives the same tokens", "[gpu][model]") {
    STRATA_REQUIRE_CUDA_GPU();
    recompute_gives_the_same_tokens(DeviceKind::Cuda);
}
TEST_CASE("cuda device: teacher-forced top-1 agrees with the CPU on 99% of positions", "[gpu][model]") {
    STRATA_REQUIRE_CUDA_GPU();
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    logits_match_the_cpu(DeviceKind::Cuda, *path);
}
// stories260K, trained, where SmolLM2 cannot travel: float weights, heads of 8 values.
TEST_CASE("cuda device: teacher-forced top-1 of the tiny llama agrees with the CPU on 99% of positions", "[gpu][model]") {
    STRATA_REQUIRE_CUDA_GPU();
    logits_match_the_cpu(DeviceKind::Cuda, test::tiny_llama_path());
}

namespace {

// Each architecture's tiny model (tests/fixtures/model/tiny_arch_logits.json) with Q8_0 matrices
// and stories260K's vocabulary, so that an engine runs it.
std::vector<std::pair<std::string, std::filesystem::path>> tiny_models_with_vocabulary() {
    const auto fx = test::model_fixture("tiny_arch_logits.json");
    std::vector<std::pair<std::string, std::filesystem::path>> out;
    for (const auto& m : fx["models"]) {
        const auto config = test::with_vocabulary(test::with_q8_0(m["config"]));
        const std::string name = config["name"];
        const auto path = test::temp_path("engine_arch_" + name + ".gguf");
        test::write_tiny_model(config, fx["seed"], 1e-5f, path);
        out.emplace_back(name, path);
    }
    return out;
}

EngineOptions tiny_options(const std::filesystem::path& model, DeviceKind device) {
    EngineOptions eo = options(model, device);
    eo.n_ctx = 128;
    return eo;
}

const std::vector<int32_t> kTinyPrompt{1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338};

}  // namespace

TEST_CASE("sim device: every architecture gives the CPU engine's greedy tokens", "[model][device][arch]") {
    for (const auto& [name, path] : tiny_models_with_vocabulary()) {
        INFO(name);
        Engine cpu(tiny_options(path, DeviceKind::Cpu));
        Engine sim(tiny_options(path, DeviceKind::Sim));
        REQUIRE(sim.backend_name() == "sim");
        const auto want = test::generate(cpu, kTinyPrompt, test::greedy(16, true)).tokens;
        CHECK(test::generate(sim, kTinyPrompt, test::greedy(16, true)).tokens == want);
        CHECK(test::prompt_logits(sim, kTinyPrompt) == test::prompt_logits(cpu, kTinyPrompt));
    }
}

TEST_CASE("cuda device: every architecture's teacher-forced top-1 agrees with the CPU where it is clear", "[gpu][model][arch]") {
    STRATA_REQUIRE_CUDA_GPU();
    for (const auto& [name, path] : tiny_models_with_vocabulary()) {
        INFO(name);
        Engine cpu(tiny_options(path, DeviceKind::Cpu));
        Engine cuda(tiny_options(path, DeviceKind::Cuda));
        REQUIRE(cuda.backend_name() != "cpu");
        const auto ref = test::prompt_logits(cpu, kTinyPrompt), got = test::prompt_logits(cuda, kTinyPrompt);
        const int64_t V = cpu.hparams().n_vocab;
        size_t checked = 0;
        for (size_t t = 0; t < kTinyPrompt.size(); ++t) {
            std::vector<float> row(ref.begin() + t * V, ref.begin() + (t + 1) * V);
            std::partial_sort(row.begin(), row.begin() + 2, row.end(), std::greater<>());
            if (row[0] - row[1] < 0.05f) continue;  // a near-tie: half-precision products may flip it
            INFO("position " << t);
            CHECK(argmax(std::span(ref).subspan(t * V, V)) == argmax(std::span(got).subspan(t * V, V)));
            ++checked;
        }
        CHECK(checked > 0);  // not every position a near-tie: something was compared
    }
}

// Device memory taken away mid-run (--sim-shrink-after): the layers the device can no longer hold
// move to the CPU with their KV cache, or the run leaves the device for the CPU alone, and it
// gives the tokens it would have given anyway.
namespace {

uint64_t device_bytes_used(const EngineOptions& o) {
    Engine e(o);
    return e.gauges().gpu_used;
}

// SmolLM2 on the simulated device by each of its plans (every layer there, layers copied in and
// streamed, CPU attention, then `n_random` random ones), with the device memory `shrunk` says
// taken away: the CPU's greedy tokens (both with an F32 KV cache: recomputed layers then give
// their K/V exactly), and `check` of the run.
void through_memory_loss(int n_random, uint32_t seed, const std::function<EngineOptions(const EngineOptions&)>& shrunk,
                         const std::function<void(Engine&)>& check) {
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    const int n = 16;
    EngineOptions o = options(*path, DeviceKind::Sim, AttentionChoice::Gpu);
    o.kv_type = DType::F32;
    const planner::Plan made = plan_of(o);
    EngineOptions cpu_options = options(*path, DeviceKind::Cpu);
    cpu_options.kv_type = DType::F32;
    Engine cpu(cpu_options);
    const auto expected = greedy_tokens(cpu, n);
    std::mt19937 rng(seed);
    std::vector<std::pair<std::string, planner::Plan>> plans = {{"every layer on the device", all_on_device(made)},
                                                                {"layers copied in and streamed", heterogeneous(made, false)},
                                                                {"CPU attention", heterogeneous(made, true)}};
    for (int i = 0; i < n_random; ++i) plans.emplace_back(fmt::format("random plan {}", i), random_plan(made, rng));
    for (const auto& [name, plan] : plans) {
        INFO(name << ": " << plan.to_json());
        o.plan = plan;
        Engine e(shrunk(o));
        CHECK(greedy_tokens(e, n) == expected);
        check(e);
    }
}

}  // namespace

TEST_CASE("sim device: memory taken away mid-generation moves layers to the CPU, same greedy tokens", "[model][device]") {
    // A prompt pass and three decode steps, then 6 MiB less than the run holds: a layer or more must go.
    through_memory_loss(3, 32, [](const EngineOptions& o) { return shrinking(o, 4, device_bytes_used(o) - (uint64_t{6} << 20)); },
                        [](Engine& e) { check_layers_moved(e.gauges()); });
}

TEST_CASE("sim device: a layer moved off the device charges its weights and its KV cache to DRAM", "[model][device]") {
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    EngineOptions o = options(*path, DeviceKind::Sim, AttentionChoice::Gpu);
    o.plan = all_on_device(plan_of(o));
    // The odd layers' KV recomputed from saved hidden states: the last layer, moved first, is one.
    const bool recompute = GENERATE(false, true);
    INFO((recompute ? "odd layers recomputed" : "every layer's KV kept"));
    o.plan->policy.recompute = recompute;
    for (auto& l : o.plan->layers)
        if (recompute && l.layer % 2 == 1) l.kv = KvOption::ActGpu;
    Engine kept(o);
    const auto expected = greedy_tokens(kept, 8);
    const uint64_t before = kept.gauges().dram_used;
    Engine e(shrinking(o, 4, device_bytes_used(o) - (uint64_t{6} << 20)));
    CHECK(greedy_tokens(e, 8) == expected);
    const TierGauges g = e.gauges();
    REQUIRE(g.gpu_layers_moved > 0);
    // The last layers moved, each read into DRAM and its KV cache (or saved hidden states) copied
    // into the host's; recomputed ones rebuild K/V on the CPU into one pair they share.
    const models::Hparams& hp = e.hparams();
    const KvCache& kv = e.kv_cache();
    const int32_t n_blocks = kv.pool().n_blocks();
    const uint64_t kv_pair = KvCache::resident_layer_bytes(n_blocks, hp.n_embd_kv(), kv.type(), false);
    uint64_t moved = 0;
    bool rebuilt = false;
    for (int il = hp.n_layer - g.gpu_layers_moved; il < hp.n_layer; ++il) {
        rebuilt = rebuilt || kv.rebuilt(il);
        moved += e.weights().layer_range(il).length +
                 (kv.rebuilt(il) ? KvCache::hidden_layer_bytes(n_blocks, hp.n_embd, kv.type()) : kv_pair);
    }
    CHECK(rebuilt == recompute);
    if (rebuilt) moved += kv_pair;
    CHECK(g.dram_used == before + moved);  // the shared pair once, however many rebuilt layers moved
}

TEST_CASE("sim device: memory taken away before load runs the model on the CPU", "[model][device]") {
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    Engine cpu(options(*path, DeviceKind::Cpu));
    EngineOptions o = options(*path, DeviceKind::Sim, AttentionChoice::Gpu);
    o.plan = all_on_device(plan_of(o));
    Engine e(shrinking(o, 0, uint64_t{1} << 20));
    CHECK(e.backend_name() == "cpu");
    // Every layer's weights and KV cache in DRAM, charged as the CPU alone charges them once
    // loaded (generating may charge more: the logits of a speculative pass the CPU alone's plan
    // chooses by this machine's probe).
    CHECK(e.gauges().dram_used == cpu.gauges().dram_used);
    CHECK(greedy_tokens(e, 8) == greedy_tokens(cpu, 8));
}

TEST_CASE("sim device: memory taken away below the device's own buffers leaves it, the CPU alone goes on, same greedy tokens",
          "[model][device]") {
    // After a prompt pass and a decode step, 1 MiB is left: less than the head and activations.
    through_memory_loss(1, 33, [](const EngineOptions& o) { return shrinking(o, 2, uint64_t{1} << 20); }, [](Engine& e) {
        CHECK(e.backend_name() == "cpu");
        const TierGauges g = e.gauges();
        CHECK(g.gpu_left);
        CHECK(g.gpu_memory_losses == 1);
        CHECK(g.gpu_used == 0);
        // Priced as it now runs: the CPU alone, its KV cache read from DRAM.
        const planner::Plan& alone = e.running_placement()->plan;
        CHECK_FALSE(alone.has_gpu);
        CHECK(alone.prediction.decode_tps_per_seq > 0);
        CHECK(e.running_placement()->n_kv_layers_in_dram == e.hparams().n_layer);
    });
}

TEST_CASE("sim device: memory taken away between a batch's passes leaves the device and runs the whole batch on the CPU",
          "[model][device]") {
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    Engine cpu(options(*path, DeviceKind::Cpu));
    // A start of 10 positions (mid-block), then a continuation of two passes scored whole, as a
    // caller of Engine::eval_batch may ask (the scheduler's steps are one pass each).
    const std::vector<int32_t> encoded = cpu.tokenizer().encode(kText, true, false);
    const std::vector<int32_t> start(encoded.begin(), encoded.begin() + 10);
    std::vector<int32_t> rest(encoded.begin() + 10, encoded.end());
    while (int64_t(rest.size()) <= Backend::kMaxUbatch) {
        const std::vector<int32_t> more = cpu.tokenizer().encode(kText, false, false);
        rest.insert(rest.end(), more.begin(), more.end());
    }
    const auto scored = [&](Engine& e) {
        const SeqId seq = e.create_seq();
        const SeqTokens first{seq, start, PassOutput::Logits}, second{seq, rest, PassOutput::AllLogits};
        e.eval_batch({&first, 1});
        const std::span<const float> rows = e.eval_batch({&second, 1});
        CHECK(e.kv().seq_len(seq) == int32_t(start.size() + rest.size()));
        return std::vector<float>(rows.begin(), rows.end());
    };
    const std::vector<float> expected = scored(cpu);
    EngineOptions o = options(*path, DeviceKind::Sim, AttentionChoice::Gpu);
    o.plan = all_on_device(plan_of(o));
    // The start's pass and the continuation's first commit on the device; 1 MiB is left for its second.
    Engine e(shrinking(o, 2, uint64_t{1} << 20));
    const std::vector<float> got = scored(e);
    CHECK(e.backend_name() == "cpu");
    CHECK(e.gauges().gpu_left);
    // Every row as the CPU alone scores it, the committed pass's too.
    REQUIRE(got.size() == expected.size());
    const int64_t V = e.hparams().n_vocab;
    for (size_t t = 0; t < rest.size(); ++t) {
        INFO("position " << start.size() + t);
        CHECK(argmax(std::span(got).subspan(t * V, V)) == argmax(std::span(expected).subspan(t * V, V)));
    }
}

TEST_CASE("sim device: a mixture of experts that leaves the device mid-batch counts the batch's expert choices once",
          "[model][device][experts]") {
    const auto fx = test::model_fixture("tiny_arch_logits.json");
    nlohmann::json config;
    for (const auto& m : fx["models"])
        if (m["config"]["name"] == "qwen3moe") config = test::with_vocabulary(test::with_q8_0(m["config"]));
    REQUIRE(config.is_object());
    const auto path = test::temp_path("engine_moe_batch_rerun.gguf");
    test::write_tiny_model(config, fx["seed"], 1e-5f, path);
    // Every routed expert held on the device; after the start's pass and the continuation's
    // first, none of its memory is left: the run leaves the device and runs the continuation again.
    EngineOptions o = options(path, DeviceKind::Sim, AttentionChoice::Gpu);
    o.overrides = {parse_tensor_override("ffn_.*_exps=device")};
    Engine e(shrinking(o, 2, 0));
    std::vector<int32_t> start(kTinyPrompt.begin(), kTinyPrompt.begin() + 10), rest;
    for (int i = 0; int64_t(rest.size()) <= Backend::kMaxUbatch; ++i) rest.push_back(3 + (i * 37) % 500);
    const SeqId seq = e.create_seq();
    const SeqTokens first{seq, start, PassOutput::Logits}, second{seq, rest, PassOutput::Logits};
    e.eval_batch({&first, 1});
    e.eval_batch({&second, 1});
    REQUIRE(e.backend_name() == "cpu");
    // Each token chose its experts once in every layer: the forgotten pass's choices are gone.
    const int n_layer = e.hparams().n_layer, n_used = e.hparams().moe.n_expert_used;
    const std::vector<std::vector<uint64_t>> routed = e.routing_stats()->snapshot();
    REQUIRE(int(routed.size()) == n_layer);
    for (const auto& layer : routed)
        CHECK(std::accumulate(layer.begin(), layer.end(), uint64_t{0}) == (start.size() + rest.size()) * n_used);
    // The device computed the start's choices, every expert being held there, and no others.
    CHECK(e.gauges().gpu_expert_choices == start.size() * n_used * n_layer);
}
