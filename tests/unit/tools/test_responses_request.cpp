// OpenAI's Responses API requests read as the chat requests they amount to: instructions and
// input items as messages (a turn's reasoning, calls and text one assistant message), flat
// function tools nested, the output settings renamed; what a server that stores nothing and runs
// no built-in tools cannot honour is a 400 naming the field.
#include <catch2/catch.hpp>

#include <memory>

#include <nlohmann/json.hpp>

#include "models/gguf_file.h"
#include "models/tokenizer.h"
#include "tests/support/api_errors.h"
#include "tests/support/model_paths.h"
#include "tools/openai/request.h"
#include "tools/responses/request.h"

using namespace strata;
using namespace strata::responses;
using strata::test::param_of;

namespace {
Json ask(Json extra = Json::object()) {
    Json j = {{"model", "m"}, {"input", "Hi"}};
    for (auto& [k, v] : extra.items()) j[k] = v;
    return j;
}
}  // namespace

TEST_CASE("responses requests: instructions and input items become the chat's messages", "[unit][responses]") {
    const Translated plain = translate(ask({{"instructions", "Be terse."}, {"stream", true}}));
    CHECK(plain.model == "m");
    CHECK(plain.stream);
    CHECK(plain.body["messages"] == Json::parse(R"([{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Hi"}])"));

    // A tool-using turn: the reasoning, the call and its output, then the answer and a new question.
    const Json input = Json::parse(R"([
        {"role": "developer", "content": "Use tools."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in"}, {"type": "input_text", "text": "Paris?"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "Needs a call."}]},
        {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": "{\"city\": \"Paris\"}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "It is sunny."}]},
        {"role": "user", "content": "Thanks"}])");
    const Json want = Json::parse(R"([
        {"role": "system", "content": "Use tools."},
        {"role": "user", "content": "Weather in\nParis?"},
        {"role": "assistant", "content": "", "reasoning_content": "Needs a call.",
         "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "assistant", "content": "It is sunny."},
        {"role": "user", "content": "Thanks"}])");
    CHECK(translate(ask({{"input", input}})).body["messages"] == want);
    // Two calls of one turn (parallel) are one assistant message's.
    const Json two = Json::parse(R"([{"role": "user", "content": "Both?"},
        {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
        {"type": "function_call", "call_id": "b", "name": "g", "arguments": "{}"}])");
    CHECK(translate(ask({{"input", two}})).body["messages"][1]["tool_calls"].size() == 2);
}

TEST_CASE("responses requests: tools, output settings and reasoning as the chat request names them", "[unit][responses]") {
    const Json body = ask({{"tools", Json::parse(R"([{"type": "function", "name": "weather", "description": "Today's",
                                                     "parameters": {"type": "object"}, "strict": true}])")},
                           {"tool_choice", {{"type", "function"}, {"name", "weather"}}},
                           {"parallel_tool_calls", false},
                           {"max_output_tokens", 64},
                           {"temperature", 0.2},
                           {"top_p", 0.9},
                           {"text", {{"format", {{"type", "json_schema"}, {"name", "w"}, {"schema", {{"type", "object"}}}, {"strict", true}}}}},
                           {"reasoning", {{"effort", "low"}, {"summary", "auto"}}},
                           {"store", true},
                           {"metadata", {{"k", "v"}}}});
    const Translated t = translate(body);
    CHECK(t.body["tools"] == Json::parse(R"([{"type": "function", "function": {"name": "weather", "description": "Today's",
                                             "parameters": {"type": "object"}, "strict": true}}])"));
    CHECK(t.body["tool_choice"] == Json::parse(R"({"type": "function", "function": {"name": "weather"}})"));
    CHECK(t.body["parallel_tool_calls"] == false);
    CHECK(t.body["max_tokens"] == 64);
    CHECK((t.body["temperature"] == 0.2 && t.body["top_p"] == 0.9));
    CHECK(t.body["response_format"] == Json::parse(R"({"type": "json_schema", "json_schema": {"name": "w", "schema": {"type": "object"}, "strict": true}})"));
    CHECK(t.body["reasoning_effort"] == "low");
    // The response repeats the settings; nothing is stored.
    CHECK(t.echo["metadata"] == Json{{"k", "v"}});
    CHECK(t.echo["store"] == false);
    CHECK(t.echo["max_output_tokens"] == 64);
    CHECK(translate(ask()).echo["tools"] == Json::array());
    CHECK(translate(ask({{"text", {{"format", {{"type", "json_object"}}}}}})).body["response_format"] == Json{{"type", "json_object"}});

    // What it amounts to is a chat request Strata reads.
    const models::GgufFile file = models::GgufFile::open(test::tiny_llama_path());
    const auto tok = models::Tokenizer::from_gguf(file);
    const models::ChatTemplate qwen3(models::ChatFamily::Qwen3);
    const openai::CompletionRequest creq =
        openai::parse_completion_request(openai::Endpoint::Chat, translate(ask({{"tools", body["tools"]}, {"max_output_tokens", 64}})).body,
                                         openai::ModelContext{*tok, qwen3, 4096, "tiny"});
    CHECK(creq.tools);
    CHECK(creq.params.n_predict == 64);
}

TEST_CASE("responses requests: what a server that stores nothing cannot honour is a 400 naming the field", "[unit][responses]") {
    CHECK(param_of([] { translate(ask({{"previous_response_id", "resp_1"}})); }) == "previous_response_id");
    CHECK(param_of([] { translate(ask({{"conversation", "conv_1"}})); }) == "conversation");
    CHECK(param_of([] { translate(ask({{"background", true}})); }) == "background");
    CHECK(param_of([] { translate(ask({{"frobnicate", 1}})); }) == "frobnicate");
    CHECK(param_of([] { translate(ask({{"input", Json::array({{{"type", "item_reference"}, {"id", "msg_1"}}})}})); }) == "input[0]");
    CHECK(param_of([] {
              translate(ask({{"input", Json::parse(R"([{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}])")}}));
          }) == "input[0].content[0]");
    CHECK(param_of([] { translate(ask({{"input", Json::parse(R"([{"type": "function_call", "name": "f", "arguments": "{}"}])")}})); }) ==
          "input[0].call_id");
    CHECK(param_of([] { translate(ask({{"tools", Json::parse(R"([{"type": "web_search"}])")}})); }) == "tools[0]");
    CHECK(param_of([] { translate(ask({{"tool_choice", {{"type", "web_search"}}}})); }) == "tool_choice");
    CHECK(param_of([] { translate(ask({{"max_output_tokens", 0}})); }) == "max_output_tokens");
    CHECK(param_of([] { translate(ask({{"truncation", "auto"}})); }) == "truncation");
    CHECK(param_of([] { translate(ask({{"include", {"file_search_call.results"}}})); }) == "include");
    CHECK(param_of([] { translate(ask({{"text", {{"format", {{"type", "xml"}}}}}})); }) == "text.format");
    CHECK(param_of([] { translate(Json{{"model", "m"}}); }) == "input");
    // Accepted as they are: settings with no effect on an answer nothing stores.
    CHECK_NOTHROW(translate(ask({{"store", false}, {"user", "u"}, {"background", false}, {"previous_response_id", nullptr},
                                 {"include", {"reasoning.encrypted_content"}}, {"truncation", "disabled"}})));
}
