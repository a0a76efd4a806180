#pragma once
// Completion objects in OpenAI's shapes: the whole answer (chat.completion, text_completion)
// with its choices, the streamed chunks (chat.completion.chunk, text_completion), usage, and
// log-probabilities in the chat shape ({"content": [{"token", "logprob", "bytes",
// "top_logprobs"}]}) or the completions one ({"tokens", "token_logprobs", "top_logprobs",
// "text_offset"}).
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "models/chat_tools.h"
#include "models/tokenizer.h"
#include "runtime/engine.h"
#include "tools/openai/json_fields.h"
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

// One choice of an answer, ready to write.
struct Choice {
    int index = 0;
    std::string text;                               // the content (chat) or text (completions)
    std::string reasoning;                          // set apart from the content (CompletionRequest::reasoning)
    std::vector<models::ChatToolCall> tool_calls;   // with their ids
    std::string finish_reason;                      // "tool_calls" when it called
    std::optional<std::vector<runtime::SampledLogprobs>> logprobs;  // when asked for
};
// The choice a finished generation makes; with tools offered its text is read for calls.
Choice make_choice(int index, const runtime::GenerateResult& r, const CompletionRequest& req);
// A new id: `prefix`, "_" and 16 hexadecimal digits.
std::string random_id(std::string_view prefix);
// A new id for a call: "call_" and 24 letters and digits, or 9 of them for Mistral's format.
std::string tool_call_id(const models::ToolCallSyntax& syntax);

// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details": {"cached_tokens"}}:
// the prompt once, the choices' tokens together.
Json usage_json(std::span<const runtime::GenerateResult> results);
// The non-streamed answer.
Json completion_json(const CompletionMeta& meta, std::span<const Choice> choices, const Json& usage, const models::Tokenizer& tok);
// The log-probabilities of `tokens` in the endpoint's shape; completions count text_offset from `offset`.
Json logprobs_json(Endpoint endpoint, std::span<const runtime::SampledLogprobs> tokens, const models::Tokenizer& tok, size_t offset);

// Streamed chunks of choice `index`: text, with the reasoning apart in `reasoning_content` (the
// first chat chunk also names the assistant role),
// tool calls (their positions among the choice's calls from `first`), the finish reason, and
// after the last choice with stream_options.include_usage, the usage without choices.
Json text_chunk_json(const CompletionMeta& meta, int index, std::string_view text, bool first, const Json& logprobs,
                     std::string_view reasoning = {});
Json tool_calls_chunk_json(const CompletionMeta& meta, int index, std::span<const models::ChatToolCall> calls, size_t first,
                           bool first_chunk);
Json final_chunk_json(const CompletionMeta& meta, int index, const std::string& finish_reason);
Json usage_chunk_json(const CompletionMeta& meta, const Json& usage);

}  // namespace strata::openai
