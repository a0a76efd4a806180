// Tool calls in each family's format: the reply split into content and calls, the part of a
// reply being streamed that is surely content, and the conversations a template refuses.
// (Rendering is checked against the templates themselves in tests/integration/test_chat_tools_prompt.py.)
#include <catch2/catch.hpp>

#include "core/error.h"
#include "models/chat_tools.h"

using namespace strata;
using namespace strata::models;

TEST_CASE("tool calls: replies split into content and calls in each family's format", "[unit][chat]") {
    const ToolCallSyntax hermes = tool_call_syntax(ChatFamily::ChatML);
    ParsedReply r = parse_reply("Sure.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": [1, \"}\"]}}\n</tool_call>\n<tool_call>\n"
                                "{\"name\": \"b\", \"arguments\": {}}\n</tool_call>", hermes);
    CHECK(r.calling);
    CHECK(r.content == "Sure.");
    REQUIRE(r.calls.size() == 2);
    CHECK(r.calls[0].name == "a");
    CHECK(r.calls[0].arguments == R"({"x":[1,"}"]})");
    CHECK(r.calls[1].name == "b");
    CHECK(r.calls[1].id.empty());

    const ToolCallSyntax llama = tool_call_syntax(ChatFamily::Llama3);
    r = parse_reply(R"({"name": "get_time", "parameters": {"tz": "UTC"}})", llama);
    REQUIRE(r.calls.size() == 1);
    CHECK(r.content.empty());
    CHECK(r.calls[0].arguments == R"({"tz":"UTC"})");
    CHECK_FALSE(llama.parallel);

    const ToolCallSyntax mistral = tool_call_syntax(ChatFamily::Llama2);
    r = parse_reply(R"([TOOL_CALLS][{"name": "f", "arguments": {"a": 1}, "id": "abcDEF123"}, {"name": "g", "arguments": {}}])", mistral);
    REQUIRE(r.calls.size() == 2);
    CHECK(r.calls[0].id == "abcDEF123");
    CHECK(r.calls[1].name == "g");

    // No trigger, or a trigger with nothing that parses as a call: it is all content.
    CHECK(parse_reply("Just words {\"name\": 1}", hermes).calls.empty());
    r = parse_reply("I would write <tool_call> here", hermes);
    CHECK(r.calls.empty());
    CHECK(r.content == "I would write <tool_call> here");
    // A call cut off in the middle: the complete ones only.
    r = parse_reply("<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"argu", hermes);
    REQUIRE(r.calls.size() == 1);
    CHECK(r.calls[0].name == "a");
    // A reply cut at its length within its first call: the call's markup is dropped, not content.
    CHECK(parse_reply("Sure.\n<tool_call>\n{\"name", hermes, /*cut=*/true).content == "Sure.");
    CHECK(parse_reply("Sure. <tool", hermes, /*cut=*/true).content == "Sure.");
    CHECK(parse_reply("Sure. <tool", hermes).content == "Sure. <tool");  // it ended there: text
    CHECK(parse_reply("1 < 2 \n", hermes, /*cut=*/true).content == "1 < 2 \n");

    CHECK_THROWS_AS(tool_call_syntax(ChatFamily::Gemma), UsageError);
}

TEST_CASE("tool calls: a call that repeats an earlier one ends the reply", "[unit][chat]") {
    const ToolCallSyntax hermes = tool_call_syntax(ChatFamily::ChatML);
    const std::string a = "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n</tool_call>";
    const std::string b = "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 2}}\n</tool_call>";
    ParsedReply r = parse_reply(a + "\n" + b, hermes);  // the same function, other arguments: two calls
    CHECK(r.calls.size() == 2);
    CHECK_FALSE(r.repeated);
    r = parse_reply(a + "\n" + b + "\n" + a + "\n" + b, hermes);  // a model looping on its calls
    REQUIRE(r.calls.size() == 2);
    CHECK(r.calls[1].arguments == "{\"x\":2}");
    CHECK(r.repeated);
    // Made to call (tool_choice required), a model goes on calling with new arguments: a second
    // call to a function ends the reply.
    ToolCallSyntax forced = hermes;
    forced.function_once = true;
    r = parse_reply(a + "\n" + b, forced);
    REQUIRE(r.calls.size() == 1);
    CHECK(r.calls[0].arguments == "{\"x\":1}");
    CHECK(r.repeated);
    const ToolCallSyntax mistral = tool_call_syntax(ChatFamily::Llama2);
    r = parse_reply(R"([TOOL_CALLS][{"name": "f", "arguments": {}}, {"name": "f", "arguments": {}}])", mistral);
    CHECK(r.calls.size() == 1);
    CHECK(r.repeated);
}

TEST_CASE("tool calls: a streamed reply is content up to where a trigger may begin", "[unit][chat]") {
    const ToolCallSyntax hermes = tool_call_syntax(ChatFamily::ChatML);
    CHECK(content_end("Hello there", hermes) == 11);
    CHECK(content_end("Hello <tool", hermes) == 6);
    CHECK(content_end("Hello <", hermes) == 6);
    CHECK(content_end("Hello <tool_call>\n{", hermes) == 6);
    CHECK(content_end("a < b", hermes) == 5);
    const ToolCallSyntax llama = tool_call_syntax(ChatFamily::Llama3);
    CHECK(content_end("{\"na", llama) == 0);
}

TEST_CASE("tool calls: conversations a family's template refuses are errors", "[unit][chat]") {
    ChatMessage call{"assistant", "", {{"call_1", "f", "{}"}}, ""};
    // Llama 3.1 takes one call per message; Mistral ids of 9 characters.
    ChatMessage two = call;
    two.tool_calls.push_back({"call_2", "g", "{}"});
    CHECK_THROWS_AS(render_with_tools(ChatTemplate(ChatFamily::Llama3), {{"user", "hi"}, two}, "", true), UsageError);
    CHECK_THROWS_AS(render_with_tools(ChatTemplate(ChatFamily::Llama2), {{"user", "hi"}, call}, "", true), UsageError);
    CHECK_THROWS_AS(render_with_tools(ChatTemplate(ChatFamily::Zephyr), {{"user", "hi"}}, R"([{"type": "function"}])", true), UsageError);
    CHECK_THROWS_AS(render_with_tools(ChatTemplate(ChatFamily::ChatML), {{"user", "hi"}}, R"({"not": "a list"})", true), UsageError);
    // Arguments that are not JSON cannot be written as the templates write them.
    ChatMessage bad = call;
    bad.tool_calls[0].arguments = "{oops";
    CHECK_THROWS_AS(render_with_tools(ChatTemplate(ChatFamily::ChatML), {{"user", "hi"}, bad}, "", true), UsageError);
    CHECK(uses_tools({{"user", "hi"}}, "[]") == false);
    CHECK(uses_tools({{"user", "hi"}, {"tool", "22 C", {}, "call_1"}}, ""));
}

TEST_CASE("tool calls: tools that are not tool objects are refused, not rendered", "[unit][chat]") {
    for (ChatFamily f : {ChatFamily::ChatML, ChatFamily::Llama3, ChatFamily::Llama2})
        for (const char* tools : {R"(["get_weather"])", R"([{"type": "function"}])", R"([{"function": 5}])"})
            CHECK_THROWS_AS(render_with_tools(ChatTemplate(f), {{"user", "hi"}}, tools, true), UsageError);
}
