// What the command line tells a new user: the commands when none is named, each command's own
// flags before the engine's, every chat template, one default temperature; a fresh seed each run.
#include <catch2/catch.hpp>

#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "models/chat_template.h"
#include "runtime/sampler.h"
#include "tests/support/model_paths.h"
#include "tests/support/run_command.h"

using namespace strata;
using namespace strata::test;

namespace {
// Where `needle` first appears in `text`, failing the test when it does not.
size_t at(const std::string& text, const std::string& needle) {
    const size_t pos = text.find(needle);
    INFO(needle << " in:\n" << text);
    REQUIRE(pos != std::string::npos);
    return pos;
}
}  // namespace

TEST_CASE("CLI help: no command lists the commands and fails", "[unit][cli]") {
    const CommandResult r = run_strata("");
    CHECK(r.exit_code != 0);
    for (const char* command : {"generate", "chat", "serve", "list", "plan", "bench", "probe", "inspect", "embed", "batch", "perplexity"})
        CHECK_THAT(r.err, Catch::Contains(command));
    CHECK_THAT(r.err, Catch::Contains("name a command"));
}

TEST_CASE("CLI help: a command's own flags come first, the engine's under their headings", "[unit][cli]") {
    const CommandResult gen = run_strata("generate --help");
    REQUIRE(gen.exit_code == 0);
    CHECK(at(gen.out, "--prompt") < at(gen.out, "Sampling:"));
    CHECK(at(gen.out, "--json-schema") < at(gen.out, "Sampling:"));
    CHECK(at(gen.out, "Sampling:") < at(gen.out, "--temp"));
    CHECK(at(gen.out, "--temp") < at(gen.out, "Engine and memory:"));
    CHECK(at(gen.out, "Engine and memory:") < at(gen.out, "--dram"));
    CHECK(at(gen.out, "Devices and the simulated device:") < at(gen.out, "--sim-link"));
    const CommandResult serve = run_strata("serve --help");
    CHECK(at(serve.out, "--models-dir") < at(serve.out, "Engine and memory:"));
    CHECK(at(serve.out, "--cors-origin") < at(serve.out, "--threads"));
}

TEST_CASE("CLI help: --chat-template lists every template family", "[unit][cli]") {
    const CommandResult chat = run_strata("chat --help");
    REQUIRE(chat.exit_code == 0);
    for (int f = 0; f <= static_cast<int>(models::ChatFamily::Phi3); ++f)
        CHECK_THAT(chat.out, Catch::Contains(std::string(models::chat_family_name(static_cast<models::ChatFamily>(f)))));
}

TEST_CASE("CLI: one default temperature for the CLI and the web page", "[unit][cli]") {
    const float t = runtime::SamplerParams{}.temperature;
    std::ostringstream shown;
    shown << "FLOAT=" << t;  // CLI11's way to show a default
    const CommandResult gen = run_strata("generate --help");
    const std::string temp_line = gen.out.substr(at(gen.out, "--temp"), gen.out.find('\n', at(gen.out, "--temp")) - at(gen.out, "--temp"));
    CHECK_THAT(temp_line, Catch::Contains(shown.str()));
    std::ifstream page(std::string(STRATA_SOURCE_DIR) + "/tools/web/chat.html");
    const std::string html((std::istreambuf_iterator<char>(page)), std::istreambuf_iterator<char>());
    std::smatch m;
    REQUIRE(std::regex_search(html, m, std::regex(R"re(id="temperature"[^>]*value="([0-9.]+)")re")));
    CHECK(std::stof(m[1].str()) == t);
    // The server's default is checked where requests are read (test_openai_request.cpp).
}

TEST_CASE("CLI: plan's --system is --machine now, and still works with a note", "[unit][cli]") {
    const std::string args = "plan --shape opt-30b --workload prompt=512,gen=32,batch=64,objective=throughput --json";
    const CommandResult old_name = run_strata(args + " --system flexgen-t4");
    const CommandResult new_name = run_strata(args + " --machine flexgen-t4");
    REQUIRE(new_name.exit_code == 0);
    CHECK(old_name.exit_code == 0);
    CHECK_THAT(old_name.err, Catch::Contains("--machine"));
    CHECK(nlohmann::json::parse(old_name.out) == nlohmann::json::parse(new_name.out));
}

TEST_CASE("CLI: each run samples with a fresh seed unless --seed names one", "[unit][cli][model]") {
    const std::string args = "generate -m " + tiny_llama_path().string() + " -p 'Once upon a time' -n 32 --temp 0.8 --json";
    const auto tokens = [&](const std::string& extra) {
        const CommandResult r = run_strata(args + extra);
        REQUIRE(r.exit_code == 0);
        return nlohmann::json::parse(r.out)["tokens"];
    };
    CHECK(tokens(" --seed 5") == tokens(" --seed 5"));
    // Two seeded runs repeat; unseeded ones differ (32 tokens at 0.8 coincide with no real chance).
    CHECK(tokens("") != tokens(""));
}
