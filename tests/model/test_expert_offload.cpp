// Expert offload end to end: a synthetic Qwen3-MoE-shaped model (bench/make_synthetic_gguf.py,
// the default model's tokenizer) generates the same tokens with its experts resident, read
// through the expert cache under a small --dram, or sent to NVMe by --override-tensor, on the
// CPU and with attention on the simulated device; bench
// saves routing statistics beside the model and the next plan uses them; and deepseek2's tiny
// model with its KV cache in DRAM beside the device.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/fixtures.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/model_paths.h"
#include "tests/support/run_command.h"
#include "tests/support/tiny_model.h"

using namespace strata;
using nlohmann::json;

namespace {

// A fresh folder `name` holding moe.gguf: 8 Qwen3-MoE-tiny layers (16 experts, 4 chosen), Q4_K,
// the default model's tokenizer; empty when that model is not here.
std::optional<std::filesystem::path> synthetic_moe(const std::string& name) {
    auto tok = test::default_model_path();
    if (!tok) return std::nullopt;
    const auto dir = test::temp_path(name);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    const auto model = dir / "moe.gguf";
    const auto made = test::run_command("python3 " STRATA_SOURCE_DIR "/bench/make_synthetic_gguf.py --shape qwen3moe-tiny "
                                        "--type Q4_K --n-layer 8 --std 0.1 --tokenizer-from " + tok->string() + " -o " +
                                        model.string());
    INFO(made.err);
    REQUIRE(made.exit_code == 0);
    return model;
}

// `strata generate --json` of the model, greedy, with `extra` flags.
json generate(const std::filesystem::path& model, const std::string& extra) {
    auto r = test::run_strata("generate --json --temp 0 -n 24 --ctx 256 -p 'The lighthouse keeper' -m " + model.string() + " " +
                              extra);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return json::parse(r.out);
}

}  // namespace

TEST_CASE("synthetic qwen3moe: the same tokens with experts resident, cached under --dram, or on NVMe", "[model][experts]") {
    const auto made = synthetic_moe("expert_offload");
    STRATA_REQUIRE_MODEL(made, "the default SmolLM2 model, whose tokenizer the synthetic model copies");
    const std::filesystem::path model = *made, dir = model.parent_path();
    auto run = [&](const std::string& extra) { return generate(model, extra); };
    const json all = run("");
    CHECK(all["memory"]["experts"].is_null());
    // 32M holds everything but about half of the experts (the file is 23 MiB; 6 MiB of the budget
    // are a speculative pass's logits).
    const json cached = run("--dram 32M");
    CHECK(cached["tokens"] == all["tokens"]);
    const json& e = cached["memory"]["experts"];
    REQUIRE(e.is_object());
    CHECK(e["misses"].get<uint64_t>() > 0);
    CHECK(e["routing"].get<std::string>().rfind("uniform", 0) == 0);
    CHECK(run("--dram 32M --expert-policy lru")["tokens"] == all["tokens"]);
    // On the simulated device: attention there, each layer's feed-forward on the host, its
    // experts resident, then read through the cache under --dram (which also holds the device's
    // staging), then with the KV cache in DRAM and the CPU attending; the overrides keep the
    // experts on the host or give the device four layers' worth, and without them the planner
    // decides. Every run gives the CPU's tokens.
    struct SimRun {
        const char* flags;
        const char* summary;  // what the plan's summary says of the experts
    };
    for (const SimRun& sim : {SimRun{"--gpu-mem 64M --override-tensor exps=dram", "attention on the GPU and feed-forward on the CPU"},
                              SimRun{"--gpu-mem 64M --dram 37M --override-tensor exps=nvme", "attention on the GPU and feed-forward on the CPU"},
                              SimRun{"--gpu-mem 64M --dram 39M --attention cpu", ""},
                              SimRun{"--gpu-mem 64M", ""},
                              SimRun{"--gpu-mem 64M --ot 'blk\\.[0-3]\\.ffn_.*_exps=device' --ot exps=dram",
                                     "attention and 64 routed experts on the GPU"},
                              SimRun{"--gpu-mem 64M --dram 37M --ot 'blk\\.[0-3]\\.ffn_.*_exps=device' --ot exps=nvme",
                                     "attention and 64 routed experts on the GPU"}}) {
        auto r = test::run_strata("generate -v --json --temp 0 -n 24 --ctx 256 -p 'The lighthouse keeper' --device sim -m " +
                                  model.string() + " " + sim.flags);
        INFO(sim.flags << "\n" << r.err);
        REQUIRE(r.exit_code == 0);
        CHECK_THAT(r.err, Catch::Contains("sim: every layer on the device but its experts"));
        const json got = json::parse(r.out);
        CHECK(got["tokens"] == all["tokens"]);
        CHECK_THAT(got["plan"]["summary"].get<std::string>(), Catch::Contains(sim.summary));
        const std::string flags = sim.flags;
        if (flags.find("exps=device") != std::string::npos) {
            // Layers 0-3 whole: 4 x 16 experts.
            CHECK_THAT(r.err, Catch::Contains("64 routed experts held on the device"));
            // Half the layers' experts, all of them: half of the choices.
            CHECK(got["memory"]["experts"]["on_device"] == 64);
            CHECK(got["memory"]["experts"]["device_share"].get<double>() == Approx(0.5));
            CHECK(got["memory"]["experts"]["predicted_device_share"].get<double>() == Approx(0.5));
        }
        if (flags.find("--dram 37M") != std::string::npos && flags.find("device") == std::string::npos)
            CHECK(got["memory"]["experts"]["misses"].get<uint64_t>() > 0);
    }
    auto no_device = test::run_strata("generate -p hi -n 1 --device cpu -m " + model.string() + " --override-tensor exps=device");
    CHECK(no_device.exit_code == 1);
    CHECK_THAT(no_device.err, Catch::Contains("gives routed experts to the device, but none is in use"));
    const json nvme = run("--override-tensor 'ffn_.*_exps=nvme'");
    CHECK(nvme["tokens"] == all["tokens"]);
    CHECK(nvme["memory"]["experts"].is_object());

    // bench saves what the router chose; the next plan reads it.
    const auto bench = test::run_strata("bench -p 16 -n 8 -r 1 -m " + model.string());
    INFO(bench.err);
    REQUIRE(bench.exit_code == 0);
    CHECK(std::filesystem::exists(dir / "moe.routing.json"));
    const json measured = run("--dram 32M");
    CHECK(measured["tokens"] == all["tokens"]);
    CHECK(measured["memory"]["experts"]["routing"].get<std::string>().rfind("measured", 0) == 0);
    auto plan = test::run_strata("plan -m " + model.string() + " --dram 32M --dram-budget 32M");
    CHECK(plan.exit_code == 0);

    // A batch of 8 sequences at a time under --dram, experts read through the cache: the budget
    // keeps room for the batch's logits beside the cache (every request failed mid-run when the
    // cache took it, leaving none for the reader's staging).
    std::ifstream doc(STRATA_SOURCE_DIR "/docs/memory-tiers.md");
    const std::string tiers((std::istreambuf_iterator<char>(doc)), {});
    const std::vector<std::string> prompts = {
        "Once upon a time, in a small village by the sea, there lived an old fisherman who", "The capital of France is",
        "The quick brown fox jumps over the lazy dog. The dog was not amused, so it barked at the fox and chased it into "
        "the forest, where the fox hid behind an old oak tree until the dog gave up and went home to sleep by the fire.\n",
        tiers.substr(0, 2998), "def fibonacci(n):\n    ", "List of prime numbers: 2, 3, 5, 7, 11,"};
    const auto input = dir / "batch.jsonl", output = dir / "batch_out.jsonl";
    {
        std::ofstream in(input);
        for (int i = 0; i < 12; ++i)
            in << json{{"custom_id", "r" + std::to_string(i)}, {"method", "POST"}, {"url", "/v1/completions"},
                       {"body", {{"prompt", prompts[size_t(i) % prompts.size()]}, {"max_tokens", 32}, {"temperature", 0}}}}
                      .dump()
               << "\n";
    }
    const auto batch = test::run_strata("batch -m " + model.string() + " -i " + input.string() + " -o " + output.string() +
                                        " --dram 36M --ctx 1024 --max-batch 8");
    INFO(batch.err);
    CHECK(batch.exit_code == 0);
    CHECK_THAT(batch.err, Catch::Contains("12 answered, 0 bad lines, 0 failed"));
    // Its passes' drafts kept within the logits the budget holds: never over it.
    CHECK_THAT(batch.err, !Catch::Contains("running over the budget"));
}

TEST_CASE("the default (dense) model: a tensor given to NVMe by name is refused, the model having no experts", "[model][experts]") {
    auto r = test::run_strata("generate -p hi -n 1 --override-tensor attn_q=nvme");
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("this model has no routed experts"));
}

TEST_CASE("synthetic qwen3moe: device memory taken away gives held experts back to the host, same tokens",
          "[model][experts][device]") {
    const auto made = synthetic_moe("expert_memory_loss");
    STRATA_REQUIRE_MODEL(made, "the default SmolLM2 model, whose tokenizer the synthetic model copies");
    const std::filesystem::path model = *made;
    const json cpu = generate(model, "");
    // Layers 0-3's experts held whole on the simulated device (64 of them), the others in DRAM, or
    // behind the expert cache on NVMe (the host reads those given back from there too).
    for (const std::string host : {"--ot exps=dram", "--dram 37M --ot exps=nvme"}) {
        const std::string flags = "--device sim --gpu-mem 64M --ot 'blk\\.[0-3]\\.ffn_.*_exps=device' " + host;
        const auto whole = test::run_strata("generate -v -n 1 --ctx 256 -p hi -m " + model.string() + " " + flags);
        std::smatch in_use;
        REQUIRE(std::regex_search(whole.err, in_use, std::regex(R"(([0-9.]+) MiB of device memory in use)")));
        const double used_mib = std::stod(in_use[1]);
        // After four passes, all but 1.35 MiB less than the run holds is taken: two layers' experts
        // (0.91 MiB each) go, whichever way the 0.1 MiB the log rounds the figure to falls.
        auto shrunk = [&](double keep_mib) {
            return test::run_strata("generate -v --json --temp 0 -n 24 --ctx 256 -p 'The lighthouse keeper' -m " + model.string() +
                                    " " + flags + " --sim-shrink-after 4:" + std::to_string(int64_t((64 - keep_mib) * 1048576)));
        };
        const auto r = shrunk(used_mib - 1.35);
        INFO(host << "\n" << r.err);
        REQUIRE(r.exit_code == 0);
        CHECK_THAT(r.err, Catch::Contains("the routed experts held for layers 3, 2 given back to the host (32 left on the device)"));
        const json got = json::parse(r.out);
        CHECK(got["tokens"] == cpu["tokens"]);
        // Priced as it ends: the experts it still holds, a quarter of the choices.
        CHECK(got["memory"]["experts"]["on_device"] == 32);
        CHECK(got["memory"]["experts"]["predicted_device_share"].get<double>() == Approx(0.25));
        // Computed there: half the choices for four passes, a quarter after.
        const double share = got["memory"]["experts"]["device_share"].get<double>();
        CHECK(share > 0.25);
        CHECK(share < 0.5);
        CHECK_THAT(got["plan"]["summary"].get<std::string>(), Catch::Contains("attention and 32 routed experts on the GPU"));
        // Less than every layer's attention and the KV cache take: the run leaves the device, its
        // KV cache copied into the host's, and goes on on the CPU alone.
        const auto over = shrunk(used_mib - 8);
        INFO(over.err);
        REQUIRE(over.exit_code == 0);
        CHECK_THAT(over.err, Catch::Contains("with every routed expert on the host the device backend still holds"));
        CHECK_THAT(over.err, Catch::Contains("the run goes on on the CPU alone"));
        const json alone = json::parse(over.out);
        CHECK(alone["tokens"] == cpu["tokens"]);
        CHECK_THAT(alone["plan"]["summary"].get<std::string>(), !Catch::Contains("on the GPU"));
        // None held on the device at the end, but it computed some of the choices before.
        const json& experts = alone["memory"]["experts"];
        CHECK(experts["on_device"] == 0);
        CHECK(experts["device_share"].get<double>() > 0);
        CHECK(experts["device_share"].get<double>() < 0.5);
    }
}

// Latent attention (deepseek2's tiny model, Q8_0) on the simulated device with a context whose
// KV cache the device cannot hold beside its working set: the cache stays in DRAM and the device
// attends to the latent rows copied up (the device runtime has no CPU attention for it; this was
// refused before), with the CPU's tokens.
TEST_CASE("tiny deepseek2: a KV cache the device cannot hold stays in DRAM, the device attending, the CPU's tokens",
          "[model][experts][device]") {
    nlohmann::json config;
    const nlohmann::json fx = test::model_fixture("tiny_arch_logits.json");
    for (const auto& m : fx["models"])
        if (m["config"]["name"] == "deepseek2") config = test::with_vocabulary(test::with_q8_0(m["config"]));
    REQUIRE(config.is_object());
    const auto model = test::temp_path("deepseek2_host_kv.gguf");
    test::write_tiny_model(config, 7, 1e-5f, model);
    auto run = [&](const std::string& flags) {
        auto r = test::run_strata("generate -v --json --temp 0 -n 16 --ctx 8192 -p 'The lighthouse keeper' -m " + model.string() +
                                  " " + flags);
        INFO(flags << "\n" << r.err);
        REQUIRE(r.exit_code == 0);
        return std::pair{json::parse(r.out), r.err};
    };
    const auto [cpu, cpu_log] = run("--device cpu");
    // The working set takes about 17 MiB at this context, the layer of the KV cache a prompt's
    // pass stages 2.7 MiB more; the whole KV cache 8 MiB.
    const auto [sim, sim_log] = run("--device sim --gpu-mem 20M --show-plan");
    CHECK_THAT(sim_log, Catch::Contains("KV cache host, copied in per layer (GPU attention)"));
    CHECK_THAT(sim_log, Catch::Contains("the KV cache in DRAM"));
    CHECK(sim["tokens"] == cpu["tokens"]);
    // With room for it, the cache is the device's: the same tokens.
    const auto [held, held_log] = run("--device sim --gpu-mem 64M --show-plan");
    CHECK_THAT(held_log, Catch::Contains("attention, norms and KV on the GPU"));
    CHECK(held["tokens"] == cpu["tokens"]);
    // CPU attention asked for: refused, saying what runs instead.
    const auto asked = test::run_strata("generate -p hi -n 2 --device sim --gpu-mem 64M --attention cpu -m " + model.string());
    CHECK(asked.exit_code == 1);
    CHECK_THAT(asked.err, Catch::Contains("leave out --attention cpu"));
}
