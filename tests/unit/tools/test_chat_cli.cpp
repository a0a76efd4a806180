// `strata chat` without a terminal, on the tiny stories260K model (which has no chat
// template): template choice, piped generation, and clean errors for bad input.
#include <catch2/catch.hpp>

#include <fstream>

#include "tests/support/gguf_writer.h"
#include "tests/support/model_paths.h"
#include "tests/support/run_command.h"

using namespace strata::test;

namespace {
std::string write_file(const std::string& name, const std::string& text) {
    auto p = temp_path(name);
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
}

void check_clean_failure(const CommandResult& r, const std::string& expected) {
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::StartsWith("strata: error: ") && Catch::Contains(expected));
}
}  // namespace

TEST_CASE("chat: a model without a chat template falls back to ChatML with a warning", "[unit][cli][chat]") {
    const std::filesystem::path model = tiny_llama_path();
    const std::string msg = write_file("chat_msg.txt", "Hello there\n");
    auto r = run_strata("chat -m " + model.string() + " --print-prompt < " + msg);
    INFO("stderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    // ChatML as OpenAI specified it; the trailing newline of the input is not part of the message.
    CHECK(r.out == "<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n");
    CHECK_THAT(r.err, Catch::Contains("the model has no chat template; using chatml"));
}

TEST_CASE("chat: --chat-template and --system choose the prompt", "[unit][cli][chat]") {
    const std::filesystem::path model = tiny_llama_path();
    const std::string msg = write_file("chat_msg2.txt", "Hi");
    auto r = run_strata("chat -m " + model.string() + " --chat-template llama3 --system 'Be brief.' --print-prompt < " + msg);
    INFO("stderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    // Meta's published Llama 3 prompt format.
    CHECK(r.out ==
          "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
          "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    check_clean_failure(run_strata("chat -m " + model.string() + " --chat-template bogus --print-prompt < " + msg),
                        "unknown chat template 'bogus'");
}

TEST_CASE("chat: piped input is one message, answered as generate completes its prompt", "[unit][cli][chat]") {
    const std::filesystem::path model = tiny_llama_path();
    const std::string m = " -m " + model.string();
    const std::string msg = write_file("chat_msg3.txt", "Once upon a time\n");
    auto rendered = run_strata("chat" + m + " --print-prompt < " + msg);
    REQUIRE(rendered.exit_code == 0);
    const std::string prompt = write_file("chat_prompt3.txt", rendered.out);

    auto chat = run_strata("chat" + m + " --temp 0 -n 12 < " + msg);
    auto gen = run_strata("generate" + m + " --temp 0 -n 12 --stop '<|im_end|>' -f " + prompt);
    INFO("chat stderr: " << chat.err << "\ngenerate stderr: " << gen.err);
    REQUIRE(chat.exit_code == 0);
    REQUIRE(gen.exit_code == 0);
    // generate echoes the prompt before its continuation; both end with one newline.
    REQUIRE_THAT(gen.out, Catch::StartsWith(rendered.out));
    CHECK(chat.out == gen.out.substr(rendered.out.size()));
    CHECK(chat.out.size() > 1);
}

TEST_CASE("chat: bad input ends with a clear error", "[unit][cli][chat]") {
    const std::filesystem::path model = tiny_llama_path();
    const std::string m = " -m " + model.string();
    check_clean_failure(run_strata("chat" + m + " < /dev/null"), "standard input is empty");
    const std::string msg = write_file("chat_msg4.txt", "hi");
    check_clean_failure(run_strata("chat" + m + " --load /nonexistent/c.json < " + msg), "cannot read the chat '/nonexistent/c.json'");
    const std::string bad_json = write_file("chat_bad.json", "{\"messages\": [");
    check_clean_failure(run_strata("chat" + m + " --load " + bad_json + " < " + msg), "is not valid JSON");
    const std::string bad_role = write_file("chat_role.json", R"({"messages": [{"role": "tool", "content": "x"}]})");
    check_clean_failure(run_strata("chat" + m + " --load " + bad_role + " < " + msg), "has role 'tool'");
    // A system prompt the context cannot hold: said at the start, not after every message.
    check_clean_failure(run_strata("chat" + m + " --chat-template chatml -c 32 --system \"" + std::string(400, 'a') + "\" < " + msg),
                        "the system prompt is");
    const std::string no_msgs = write_file("chat_nomsgs.json", R"({"system": "s"})");
    check_clean_failure(run_strata("chat" + m + " --load " + no_msgs + " --print-prompt < " + msg), "no \"messages\" array");
}
