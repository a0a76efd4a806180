// Anthropic's Messages API requests read as the chat requests they amount to: the system prompt
// and content blocks as messages (tool results as tool messages, tool_use and thinking blocks as
// an assistant message's calls and reasoning), tools' input_schema as parameters, tool_choice and
// thinking renamed; what this server cannot honour is a 400 naming the field.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "tests/support/api_errors.h"
#include "tools/anthropic/request.h"

using namespace strata;
using namespace strata::anthropic;
using strata::test::param_of;

namespace {
Json ask(Json extra = Json::object()) {
    Json j = {{"model", "m"}, {"max_tokens", 64}, {"messages", Json::parse(R"([{"role": "user", "content": "Hi"}])")}};
    for (auto& [k, v] : extra.items()) j[k] = v;
    return j;
}
}  // namespace

TEST_CASE("anthropic requests: the system prompt and content blocks become the chat's messages", "[unit][anthropic]") {
    const Translated plain = translate(ask({{"system", "Be terse."}, {"stream", true}, {"stop_sequences", {"END"}}}));
    CHECK(plain.model == "m");
    CHECK(plain.stream);
    CHECK(plain.stop_sequences == std::vector<std::string>{"END"});
    CHECK(plain.body["messages"] == Json::parse(R"([{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Hi"}])"));
    CHECK(plain.body["max_tokens"] == 64);
    CHECK(plain.body["stop"] == Json{"END"});

    const Json messages = Json::parse(R"([
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "Needs a call.", "signature": "x"},
                                          {"type": "text", "text": "Checking."},
                                          {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny"}]},
                                     {"type": "text", "text": "And tomorrow?"}]}])");
    const Json want = Json::parse(R"([
        {"role": "system", "content": "Use tools."},
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
        {"role": "assistant", "content": "Checking.", "reasoning_content": "Needs a call.",
         "tool_calls": [{"id": "toolu_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"},
        {"role": "user", "content": [{"type": "text", "text": "And tomorrow?"}]}])");
    CHECK(translate(ask({{"system", Json::parse(R"([{"type": "text", "text": "Use tools."}])")}, {"messages", messages}})).body["messages"] ==
          want);

    // A failed call's result says so: the tool message is all a chat template shows of it.
    const auto result_of = [](const Json& block) {
        const Json turn = {{"role", "user"}, {"content", Json::array({block})}};
        return translate(ask({{"messages", Json::array({turn})}})).body["messages"][0]["content"];
    };
    CHECK(result_of(Json::parse(R"({"type": "tool_result", "tool_use_id": "t", "content": "no such city", "is_error": true})")) ==
          "Error: no such city");
    CHECK(result_of(Json::parse(R"({"type": "tool_result", "tool_use_id": "t", "is_error": true})")) == "Error");
    CHECK(result_of(Json::parse(R"({"type": "tool_result", "tool_use_id": "t", "content": "sunny", "is_error": false})")) == "sunny");
}

TEST_CASE("anthropic requests: tools, tool_choice, thinking and sampling as the chat request names them", "[unit][anthropic]") {
    const Translated t = translate(ask({{"tools", Json::parse(R"([{"name": "weather", "description": "Today's",
                                                                  "input_schema": {"type": "object"}}])")},
                                        {"tool_choice", {{"type", "tool"}, {"name", "weather"}, {"disable_parallel_tool_use", true}}},
                                        {"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}},
                                        {"temperature", 0.5},
                                        {"top_k", 20},
                                        {"metadata", {{"user_id", "u"}}}}));
    CHECK(t.body["tools"] == Json::parse(R"([{"type": "function", "function": {"name": "weather", "description": "Today's",
                                             "parameters": {"type": "object"}}}])"));
    CHECK(t.body["tool_choice"] == Json::parse(R"({"type": "function", "function": {"name": "weather"}})"));
    CHECK(t.body["parallel_tool_calls"] == false);
    CHECK(t.body["thinking_budget_tokens"] == 1024);
    CHECK((t.body["temperature"] == 0.5 && t.body["top_k"] == 20));
    CHECK(translate(ask({{"tool_choice", {{"type", "any"}}}})).body["tool_choice"] == "required");
    CHECK(translate(ask({{"thinking", {{"type", "disabled"}}}})).body["chat_template_kwargs"] == Json{{"enable_thinking", false}});
    const Translated config = translate(ask(Json::parse(R"({"output_config": {"effort": "max", "format": {"type": "json_schema", "schema": {"type": "object"}}},
                                                        "thinking": {"type": "adaptive", "display": "omitted"},
                                                        "cache_control": {"type": "ephemeral"}})")));
    CHECK(config.body["reasoning_effort"] == "high");  // gpt-oss's highest
    CHECK(config.body["response_format"] ==
          Json::parse(R"({"type": "json_schema", "json_schema": {"name": "output", "schema": {"type": "object"}, "strict": true}})"));
    CHECK(config.omit_thinking);
    // count_tokens: no max_tokens needed.
    CHECK_NOTHROW(translate(Json{{"model", "m"}, {"messages", Json::parse(R"([{"role": "user", "content": "Hi"}])")}}, true));
}

TEST_CASE("anthropic requests: what this server cannot honour is a 400 naming the field", "[unit][anthropic]") {
    const auto with_messages = [](const char* messages) { return ask({{"messages", Json::parse(messages)}}); };
    CHECK(param_of([] { translate(Json{{"model", "m"}, {"messages", Json::parse(R"([{"role": "user", "content": "Hi"}])")}}); }) ==
          "max_tokens");
    CHECK(param_of([] { translate(ask({{"mcp_servers", Json::array()}})); }) == "mcp_servers");
    CHECK(param_of([&] { translate(with_messages(R"([{"role": "user", "content": [{"type": "image", "source": {}}]}])")); }) ==
          "messages[0].content[0]");
    CHECK(param_of([&] { translate(with_messages(R"([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "The"}])")); }) ==
          "messages[1]");
    CHECK(param_of([&] { translate(with_messages(R"([{"role": "system", "content": "Hi"}])")); }) == "messages[0].role");
    CHECK(param_of([&] { translate(with_messages("[]")); }) == "messages");
    CHECK(param_of([&] { translate(with_messages(R"([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yes"},
                                                     {"role": "user", "content": []}])")); }) == "messages[2].content");
    CHECK(param_of([] { translate(ask({{"thinking", "on"}})); }) == "thinking");
    CHECK(param_of([] { translate(ask({{"tools", Json::parse(R"([{"type": "web_search_20250305", "name": "web_search"}])")}})); }) ==
          "tools[0]");
    CHECK(param_of([] { translate(ask({{"tools", Json::parse(R"([{"name": "f"}])")}})); }) == "tools[0].input_schema");
    CHECK(param_of([] { translate(ask({{"tool_choice", {{"type", "some"}}}})); }) == "tool_choice");
    CHECK(param_of([] { translate(ask({{"thinking", {{"type", "enabled"}}}})); }) == "thinking.budget_tokens");
    CHECK(param_of([] { translate(ask({{"output_config", {{"format", {{"type", "xml"}}}}}})); }) == "output_config.format");
    CHECK(param_of([] { translate(ask({{"output_config", {{"task_budget", 5}}}})); }) == "output_config.task_budget");
}
