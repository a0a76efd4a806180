#pragma once
// Conversations with tools, rendered as each family's own template renders them (checked
// against the templates by jinja2 in tests/integration/test_chat_tools_prompt.py):
//   ChatML    Qwen2.5's (Hermes): the tools in the system turn, calls in <tool_call> tags,
//             results in <tool_response> tags inside a user turn
//   Qwen3     Hermes's tools, calls and results, its turns' <think> reasoning as Qwen3's template keeps it
//   Llama 3   Llama 3.1's: the tools and the date lines, calls as {"name", "parameters"},
//             results in ipython turns
//   Llama 2   Mistral's (Nemo): [AVAILABLE_TOOLS] before the last user turn, [TOOL_CALLS],
//             [TOOL_RESULTS]
// and what the model writes back: the text that opens its calls, how each is written, and
// the reply split into content and calls.
#include <string>
#include <string_view>
#include <vector>

#include "models/chat_template.h"

namespace strata::models {

// Whether the conversation needs the tool format: tools offered, or a message that calls or
// answers one.
bool uses_tools(const std::vector<ChatMessage>& messages, std::string_view tools_json);

// Throws UsageError for a family without a tool format, tools that are not a JSON list, or a
// conversation the family's template refuses.
std::string render_with_tools(const ChatTemplate& chat_template, const std::vector<ChatMessage>& messages, std::string_view tools_json,
                              bool add_generation_prompt);

// The two templates whose plain conversations are their tool conversations without tools:
// Meta-Llama-3.1-Instruct's, its system turn dated `date` ("26 Jul 2024"), and
// Mistral-Nemo-Instruct's (tekken), v3's (its spacing) or v7's (system messages as
// [SYSTEM_PROMPT] turns where they stand), by `inst`. `tools_json` empty: none.
std::string render_llama31(const std::vector<ChatMessage>& messages, std::string_view tools_json, bool add_generation_prompt,
                           const std::string& date);
std::string render_mistral(const std::vector<ChatMessage>& messages, std::string_view tools_json, ChatDialect::Inst inst);
// Qwen3's: an assistant turn's <think> reasoning (ChatMessage::reasoning where given apart, as
// its template takes reasoning_content) dropped before the last user message and kept, in a block
// of its own, after it; the tools (`tools_json` empty: none) as Qwen2.5's, after the
// conversation's own system prompt (it has no default).
std::string render_qwen3(const std::vector<ChatMessage>& messages, std::string_view tools_json, bool add_generation_prompt);
// The date a Llama 3.1-style template writes: today's, or its default.
std::string llama31_date(const ChatDialect& dialect);

// How a family's model writes its calls: open, then each call (call_open, the call's JSON
// object, call_close) with `separator` between them, then close. `trigger` starts the calls.
struct ToolCallSyntax {
    std::string trigger;
    std::string open, close;
    std::string call_open, call_close, separator;
    std::string args_key;   // "arguments", or "parameters" (Llama 3.1)
    bool parallel = true;   // the format has room for several calls
    bool with_id = false;   // each call carries an "id" of 9 letters and digits (Mistral)
    // How the reply is read, not written: a call to a function already called ends it (a model
    // made to call, tool_choice "required", goes on calling with new arguments); otherwise only
    // a call that repeats an earlier one, name and arguments alike, does.
    bool function_once = false;
};
// Throws UsageError for a family without a tool format.
ToolCallSyntax tool_call_syntax(ChatFamily family);

struct ParsedReply {
    std::string content;  // the text before the calls
    std::vector<ChatToolCall> calls;
    bool calling = false;   // the reply wrote the trigger
    bool repeated = false;  // a call repeated an earlier one (see function_once): the reply ends before it
};
// Splits a reply into content and the complete calls after the trigger (each a JSON object
// with a string "name" and an object args_key). A reply whose calls do not parse is content.
// A call that repeats an earlier one (syntax.function_once: its function), and whatever
// follows it, is left out. A reply `cut` at its length drops the call it was writing (and a
// trigger begun at its end) instead of taking that markup for text.
ParsedReply parse_reply(std::string_view text, const ToolCallSyntax& syntax, bool cut = false);
// How much of a reply being written is surely content: up to the trigger, or up to where the
// text might be starting one.
size_t content_end(std::string_view text, const ToolCallSyntax& syntax);

}  // namespace strata::models
