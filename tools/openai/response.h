#pragma once
// Completion objects in OpenAI's shapes: the whole answer (chat.completion, text_completion),
// the streamed chunks (chat.completion.chunk, text_completion) and usage.
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "runtime/engine.h"
#include "tools/openai/request.h"

namespace strata::openai {

// "stop" for eos/stop, "length" for length/context; empty for cancelled or failed requests,
// which have none.
std::string finish_reason(std::string_view stop_reason);

// Names one answer: its id ("chatcmpl-..." or "cmpl-..."), creation time and model.
struct CompletionMeta {
    Endpoint endpoint;
    std::string id;
    int64_t created = 0;  // Unix seconds
    std::string model;
    // A fresh random id and the current time.
    static CompletionMeta make(Endpoint endpoint, std::string model);
};

// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details": {"cached_tokens"}}
nlohmann::json usage_json(const runtime::GenerateResult& r);
// The non-streamed answer.
nlohmann::json completion_json(const CompletionMeta& meta, const runtime::GenerateResult& r);
// A streamed chunk carrying `text`; the first chat chunk also carries the assistant role.
nlohmann::json text_chunk_json(const CompletionMeta& meta, std::string_view text, bool first);
// The last chunk with choices: no text, the finish reason.
nlohmann::json final_chunk_json(const CompletionMeta& meta, const std::string& finish_reason);
// After the final chunk when stream_options.include_usage: no choices, the usage.
nlohmann::json usage_chunk_json(const CompletionMeta& meta, const runtime::GenerateResult& r);

// JSON text for the wire: invalid UTF-8 from a model is replaced, never an exception.
std::string dump(const nlohmann::json& j);

}  // namespace strata::openai
