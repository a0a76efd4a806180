// `--plan FILE`, `--show-plan`, `-v` and `generate --json` with the plan the runtime runs by.
#include <catch2/catch.hpp>

#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/support/gguf_writer.h"
#include "tests/support/model_paths.h"
#include "tests/support/run_command.h"
#include "tests/support/tiny_model.h"

using namespace strata::test;

namespace {
nlohmann::json read_json(const std::filesystem::path& p) {
    std::ifstream in(p);
    return nlohmann::json::parse(in);
}
void write_json(const std::filesystem::path& p, const nlohmann::json& j) { std::ofstream(p) << j.dump(2); }
}  // namespace

TEST_CASE("CLI: a plan that streams layers runs from --plan with the same tokens, and --show-plan prints it", "[unit][cli][placement]") {
    const std::filesystem::path model = tiny_llama_path();
    const std::string m = "-m " + model.string();
    // A catalog machine without a GPU: no probe, a plan this runtime can run.
    const auto plan_path = temp_path("stories_plan.json");
    REQUIRE(run_strata("plan " + m + " --gpu none --dram 16G -o " + plan_path.string()).exit_code == 0);
    // Read layers 2-4 from the file instead (the tiny model fits anywhere, so edit the plan).
    auto plan = read_json(plan_path);
    for (auto& l : plan["layers"])
        if (l["layer"].get<int>() >= 2) l["weights"] = "nvme(cpu)";
    const auto streamed_path = temp_path("stories_plan_streamed.json");
    write_json(streamed_path, plan);

    const std::string gen = "generate " + m + " -p 'Once upon a time' -n 12 --temp 0 --json";
    const auto resident = run_strata(gen);
    REQUIRE(resident.exit_code == 0);
    const auto r = nlohmann::json::parse(resident.out);
    CHECK(r["plan"]["layers_streamed"] == 0);
    CHECK(r["plan"]["given"] == false);
    CHECK(r["plan"]["predicted"]["decode_tokens_per_s"].get<double>() > 0);

    const auto replayed = run_strata(gen + " --plan " + streamed_path.string() + " --show-plan -v");
    INFO("stderr: " << replayed.err);
    REQUIRE(replayed.exit_code == 0);
    const auto s = nlohmann::json::parse(replayed.out);
    CHECK(s["tokens"] == r["tokens"]);  // offload changes speed, never results
    CHECK(s["plan"]["given"] == true);
    CHECK(s["plan"]["layers_streamed"] == 3);
    CHECK(s["memory"]["layers_streamed"] == 3);
    CHECK(s["memory"]["bytes_streamed"].get<uint64_t>() > 0);
    CHECK(s["plan"]["predicted"]["prefill_tokens_per_s"].get<double>() > 0);
    // --show-plan: the table, before the text; -v: the one-line summary.
    CHECK_THAT(replayed.err, Catch::Contains("layers      weights") && Catch::Contains("2-4         nvme") &&
                                 Catch::Contains("(given)") && Catch::Contains("predicted TTFT"));
    CHECK_THAT(replayed.err, Catch::Contains("plan: 0 layers on GPU / 2 DRAM / 3 NVMe"));
}

TEST_CASE("CLI: --show-plan on perplexity and chat, chat planned for its piped message or --plan-prompt", "[unit][cli][placement]") {
    const std::filesystem::path model = tiny_llama_path();
    const auto text = temp_path("ppl_text.txt");
    std::ofstream(text) << "Once upon a time there was a little girl who liked to play in the park with her dog.";
    const auto ppl = run_strata("perplexity -m " + model.string() + " -f " + text.string() + " --chunk 16 --show-plan");
    INFO("stderr: " << ppl.err);
    CHECK(ppl.exit_code == 0);
    CHECK_THAT(ppl.err, Catch::Contains("layers      weights") && Catch::Contains("workload  prompt"));
    const auto chat = run_command("echo hello | " + strata_binary().string() + " chat -m " + model.string() + " --show-plan -n 4");
    CHECK(chat.exit_code == 0);
    CHECK_THAT(chat.err, Catch::Contains("layers      weights"));
    // Planned for the piped message's prompt, as generate plans for that text (not for a prompt
    // filling stories260K's context of 2048), or for the length --plan-prompt names.
    const auto rendered = temp_path("chat_rendered_prompt.txt");
    REQUIRE(run_command("echo hello | " + strata_binary().string() + " chat -m " + model.string() + " --print-prompt > " +
                        rendered.string())
                .exit_code == 0);
    const auto gen = run_strata("generate -m " + model.string() + " -f " + rendered.string() + " --show-plan -n 4");
    REQUIRE(gen.exit_code == 0);
    const auto workload = [](const std::string& err) {
        const size_t at = err.find("workload  prompt ");
        return at == std::string::npos ? std::string() : err.substr(at, err.find('\n', at) - at);
    };
    CHECK(workload(chat.err) == workload(gen.err));
    CHECK_THAT(workload(chat.err), Catch::StartsWith("workload  prompt ") && !Catch::Contains("prompt 2044"));
    const auto told = run_command("echo hello | " + strata_binary().string() + " chat -m " + model.string() +
                                  " --show-plan -n 4 --plan-prompt 40");
    CHECK(told.exit_code == 0);
    CHECK_THAT(told.err, Catch::Contains("workload  prompt 40, generate 4,"));
}

TEST_CASE("CLI: --plan for another model, for a GPU, or not a plan is refused clearly", "[unit][cli][placement]") {
    const std::filesystem::path model = tiny_llama_path();
    const std::string gen = "generate -m " + model.string() + " -p hi -n 2 --plan ";

    const auto tiny = temp_path("cli_plan_other.gguf");
    write_tiny_model(tiny_config("llama", 64, 3, 128), 1, 1e-5f, tiny);
    const auto other = temp_path("other_model_plan.json");
    REQUIRE(run_strata("plan -m " + tiny.string() + " --gpu none --dram 16G -o " + other.string()).exit_code == 0);
    auto r = run_strata(gen + other.string());
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::StartsWith("strata: error: the plan was made for") && Catch::Contains("hint: make a new plan"));

    const auto gpu = temp_path("gpu_plan.json");
    // A batch of 32, where the GPU's plan beats the CPU alone's by far (one sequence is a near tie,
    // left to the CPU).
    REQUIRE(run_strata("plan -m " + model.string() + " --gpu rtx4090 --workload prompt=512,gen=128,batch=32 -o " + gpu.string())
                .exit_code == 0);
    r = run_strata(gen + gpu.string());
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("this runtime runs on the CPU only"));

    const auto junk = temp_path("not_a_plan.json");
    std::ofstream(junk) << "{\"hello\": 1}";
    r = run_strata(gen + junk.string());
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("--plan " + junk.string() + ": the file is not a Strata plan"));
    r = run_strata(gen + "/nonexistent/plan.json");
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("cannot read the plan"));
}
