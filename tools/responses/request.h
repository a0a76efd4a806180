#pragma once
// OpenAI's Responses API (POST /v1/responses) translated into the chat completions body Strata
// already reads (tools/openai/), as Ollama's requests are: `instructions` and `input` (a text, or
// items: messages, function calls with their outputs, reasoning) as messages; function tools
// (flat in this API) as chat tools; max_output_tokens as max_tokens; text.format as
// response_format; reasoning.effort as reasoning_effort. Nothing is stored, so
// previous_response_id, conversations and item references are a 400 (send the whole
// conversation in `input`), as are built-in tools, background runs and every field Strata does
// not know: none is silently ignored.
#include <string>

#include <nlohmann/json.hpp>  // the translated bodies are values here

#include "tools/openai/json_fields.h"

namespace strata::responses {

using openai::Json;

struct Translated {
    std::string model;  // as the request named it ("" for the server's)
    Json body;          // the /v1/chat/completions request it amounts to
    bool stream = false;
    Json echo;          // the request's settings the response object repeats (instructions, tools, ...)
};

// Throws ApiError 400 naming the field.
Translated translate(const Json& body);

}  // namespace strata::responses
