// Tool calls streamed: what the stream sends adds up to what the whole reply gives.
#include <catch2/catch.hpp>

#include "tools/openai/request.h"
#include "tools/openai/response.h"
#include "tools/openai/tool_stream.h"

using namespace strata;
using namespace strata::openai;

TEST_CASE("openai tool calls: streamed in pieces, the same content and calls as the whole reply", "[unit][openai]") {
    const std::vector<std::pair<models::ChatFamily, std::string>> replies = {
        {models::ChatFamily::ChatML, "Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"q\": \"x y\"}}\n</tool_call>\n"
                                     "<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>"},
        {models::ChatFamily::ChatML, "No tools needed: 1 < 2, and {braces} too."},
        {models::ChatFamily::ChatML, "Trailing trigger text <tool_call> that never closes"},
        {models::ChatFamily::Llama3, R"({"name": "t", "parameters": {"z": 1}})"},
        {models::ChatFamily::Llama2, R"([TOOL_CALLS][{"name": "f", "arguments": {}, "id": "a1b2c3d4e"}])"},
        // Cut at max_tokens (below) within a call, or within its trigger.
        {models::ChatFamily::ChatML, "Checking.\n<tool_call>\n{\"name"},
        {models::ChatFamily::ChatML, "Checking. <tool"},
        {models::ChatFamily::ChatML, "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"na"},
    };
    for (const auto& [family, text] : replies) {
        for (const bool cut : {false, true}) {
            const models::ToolCallSyntax syntax = models::tool_call_syntax(family);
            CompletionRequest req;
            req.tools = syntax;
            runtime::GenerateResult r;
            r.text = text;
            r.stop_reason = cut ? "length" : "eos";
            const Choice whole = make_choice(0, r, req);
            for (size_t piece : {1, 3, 7}) {
                INFO(text << " in pieces of " << piece << (cut ? ", cut at its length" : ""));
                ToolCallStream stream(syntax);
                std::string content;
                std::vector<models::ChatToolCall> calls;
                auto take = [&](const ToolCallStream::Delta& d) {
                    content += d.content;
                    CHECK(d.first == calls.size());
                    calls.insert(calls.end(), d.calls.begin(), d.calls.end());
                };
                for (size_t i = 0; i < text.size(); i += piece) take(stream.push(text.substr(i, piece)));
                take(stream.finish(cut));
                CHECK(content == whole.text);
                REQUIRE(calls.size() == whole.tool_calls.size());
                for (size_t i = 0; i < calls.size(); ++i) {
                    CHECK(calls[i].name == whole.tool_calls[i].name);
                    CHECK(calls[i].arguments == whole.tool_calls[i].arguments);
                    CHECK_FALSE(calls[i].id.empty());
                }
                CHECK(stream.called() == !calls.empty());
            }
            // Markup of a call the length cut is never content; a reply that ended is left as written.
            if (cut) CHECK(whole.text.find("<tool") == std::string::npos);
            if (!cut && family == models::ChatFamily::ChatML && whole.tool_calls.empty()) CHECK(whole.text == text);
        }
    }
}
