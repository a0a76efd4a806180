// `strata inspect` and `strata list` on a file whose metadata holds control bytes and long
// values: --json gives the values as data, whole, and the tables show the text, never obey it.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/gguf_writer.h"
#include "tests/support/run_command.h"

using namespace strata::test;

namespace {
constexpr uint32_t kF32 = 0;  // ggml's type id

std::filesystem::path hostile_model(const std::filesystem::path& dir) {
    std::filesystem::create_directories(dir);
    const auto path = dir / "hostile.gguf";
    std::vector<std::string> tokens;
    for (int i = 0; i < 40; ++i) tokens.push_back("t" + std::to_string(i));
    GgufWriter()
        .kv_string("general.architecture", "llama")
        .kv_string("general.name", "\x1b[2J\x1b[31mPWNED\nfake row")
        .kv_u32("llama.context_length", 8192)
        .kv_u32("llama.embedding_length", 4)
        .kv_u32("llama.block_count", 1)
        .kv_u32("llama.feed_forward_length", 8)
        .kv_u32("llama.attention.head_count", 1)
        .kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
        .kv_string("tokenizer.chat_template", std::string(300, 'x') + "end")
        .kv_string_array("tokenizer.ggml.tokens", tokens)
        .tensor("token_embd.weight", kF32, {4, 2}, std::vector<uint8_t>(32, 0))
        .write(path);
    return path;
}
}  // namespace

TEST_CASE("CLI: inspect --json gives metadata as data; inspect and list never print a file's control bytes", "[unit][cli]") {
    const auto dir = temp_path("inspect_hostile");
    const auto model = hostile_model(dir);

    const auto j = run_strata("inspect --json " + model.string());
    INFO(j.err);
    REQUIRE(j.exit_code == 0);
    const auto meta = nlohmann::json::parse(j.out)["metadata"];
    CHECK(meta["general.architecture"] == "llama");  // a string, not "\"llama\""
    CHECK(meta["llama.context_length"] == 8192);     // a number
    CHECK(meta["llama.attention.layer_norm_rms_epsilon"] == 1e-5);
    CHECK(meta["tokenizer.chat_template"].get<std::string>().size() == 303);  // whole
    CHECK(meta["general.name"] == "\x1b[2J\x1b[31mPWNED\nfake row");          // JSON escapes it
    const auto tokens = meta["tokenizer.ggml.tokens"];
    CHECK(tokens["type"] == "string");
    CHECK(tokens["count"] == 40);
    CHECK(tokens["items"].size() == 16);
    CHECK(tokens["items"][15] == "t15");

    // The name's ESC bytes as U+FFFD; its line end a space in inspect's value, U+FFFD in list's alias cell.
    const std::vector<std::pair<std::string, std::string>> shown = {
        {"inspect " + model.string(), "\"\xEF\xBF\xBD[2J\xEF\xBF\xBD[31mPWNED fake row\""},
        {"list --models-dir " + dir.string(), "\xEF\xBF\xBD[2J\xEF\xBF\xBD[31mPWNED\xEF\xBF\xBD" "fake row"}};
    for (const auto& [command, name] : shown) {
        const auto r = run_strata(command);
        INFO(command << "\n" << r.out << r.err);
        REQUIRE(r.exit_code == 0);
        CHECK(r.out.find('\x1b') == std::string::npos);
        CHECK_THAT(r.out, Catch::Contains(name));
    }
}
