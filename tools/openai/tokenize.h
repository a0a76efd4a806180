#pragma once
// The bodies of llama.cpp's server endpoints for clients that count or inspect tokens:
//   POST /tokenize       {"content", "add_special": false, "parse_special": true, "with_pieces": false}
//                        -> {"tokens": [ids]} or, with pieces, [{"id", "piece"}] (bytes when not UTF-8)
//   POST /detokenize     {"tokens": [ids]} -> {"content"}
//   POST /apply-template a chat request's messages and tools -> {"prompt"}: the text the model reads
// Every malformed body is a 400 naming the field.
#include "tools/openai/json_fields.h"
#include "tools/openai/request.h"

namespace strata::openai {

Json tokenize_json(const Json& body, const ModelContext& model);
Json detokenize_json(const Json& body, const ModelContext& model);
Json apply_template_json(const Json& body, const ModelContext& model);
// The tokens of a chat request's prompt (its messages and tools in the template), as the chat
// endpoint reads it, however long (Anthropic's count_tokens).
size_t chat_prompt_tokens(const Json& body, const ModelContext& model);

}  // namespace strata::openai
