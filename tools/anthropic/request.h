#pragma once
// Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens) translated into the
// chat completions body Strata already reads (tools/openai/), as Ollama's and the Responses API's
// requests are: `system` and `messages` (text, tool_use, tool_result and thinking blocks) as chat
// messages, `tools` (input_schema) as function tools, tool_choice's auto/any/tool/none, stop
// sequences, sampling, `thinking` as the reasoning budget (budget_tokens) or reasoning turned
// off (disabled), and output_config's effort and JSON schema. Images, documents, server tools (web search, code execution, ...), MCP servers,
// a final assistant message to continue (a prefill) and every field Strata does not know are a
// 400 naming it.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>  // the translated bodies are values here

#include "tools/openai/json_fields.h"

namespace strata::anthropic {

using openai::Json;

struct Translated {
    std::string model;
    Json body;  // the /v1/chat/completions request it amounts to
    bool stream = false;
    std::vector<std::string> stop_sequences;  // the request's own (a reply they end stops at "stop_sequence")
    bool omit_thinking = false;               // thinking.display "omitted": the reasoning left out of the answer
};

// POST /v1/messages; `counting` (count_tokens): max_tokens, stream and sampling are not asked for.
// Throws ApiError 400 naming the field.
Translated translate(const Json& body, bool counting = false);

}  // namespace strata::anthropic
