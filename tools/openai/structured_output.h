#pragma once
// What a request asks of the shape of its output, turned into a grammar for the sampler
// (runtime/grammar/): `response_format` json_object or json_schema, llama.cpp's `grammar`
// (GBNF), and `tools` with `tool_choice`. Tools are offered in the chat family's own format;
// with tool_choice "required" or a named function (called once) the whole reply is held to the calls'
// grammar, with "auto" the grammar takes over once the reply writes the family's trigger
// (llama.cpp's lazy grammar), so a call is never malformed.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/chat_tools.h"
#include "runtime/grammar/gbnf.h"
#include "tools/openai/json_fields.h"

namespace strata::openai {

// `response_format` (text, json_object, json_schema) or `grammar`; nullptr when the output is free.
std::shared_ptr<const runtime::Grammar> output_grammar(const Json& body);

struct ToolUse {
    models::ToolCallSyntax syntax;
    std::string tools_json;  // the tools as the prompt shows them (the request's own text)
    std::shared_ptr<const runtime::Grammar> grammar;
    std::vector<std::string> triggers;  // empty: the reply must call
};
// The tools of a chat request; nullopt without tools or with tool_choice "none".
std::optional<ToolUse> tool_use(const Json& body, models::ChatFamily family);
// The tools the prompt shows (the request's own JSON text); empty without tools or with tool_choice "none".
std::string offered_tools(const Json& body);

}  // namespace strata::openai
