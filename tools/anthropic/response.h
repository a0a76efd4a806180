#pragma once
// Answers of Anthropic's Messages API (tools/anthropic/request.h): the message with its content
// blocks (the reasoning as a thinking block, the answer as a text block, each call a tool_use
// block with its input as JSON), stop reason and usage; streamed, the server-sent events that
// build it (message_start, each block's content_block_start, deltas and content_block_stop,
// message_delta, message_stop). A whole answer is written as a stream of one piece is.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/chat_template.h"
#include "tools/openai/json_fields.h"

namespace strata::anthropic {

using openai::Json;

// Anthropic's usage: the prompt tokens evaluated (input_tokens), those read from the prefix
// cache (cache_read_input_tokens) and the output's.
struct Usage {
    int64_t prompt_tokens = 0, cached_tokens = 0, output_tokens = 0;
};

class MessageWriter {
public:
    MessageWriter(std::string model, int64_t prompt_tokens, int64_t cached_tokens);

    // message_start (and a ping).
    std::string start();
    // The events of the reply's next reasoning, answer and complete calls.
    std::string next(std::string_view thinking, std::string_view text, const std::vector<models::ChatToolCall>& calls);
    // Closes the open block; message_delta with the stop reason ("end_turn", "max_tokens",
    // "stop_sequence" with the sequence, "tool_use") and the usage as it ends (the prompt's
    // cached tokens now known); message_stop.
    std::string finish(const std::string& stop_reason, const std::string& stop_sequence, int64_t output_tokens,
                       int64_t cached_tokens);
    // An error event (error_json's body): the stream ends there.
    static std::string error(int status, const std::string& message);

    // The message as it stands (after finish: whole).
    Json message() const;

private:
    enum class Open { None, Thinking, Text };
    void event(const std::string& type, Json fields);
    void open(Open kind);
    void close();

    std::string id_, model_;
    Json content_ = Json::array();
    Json stop_reason_ = nullptr, stop_sequence_ = nullptr;
    Usage usage_;
    Open open_ = Open::None;
    std::string events_;
};

// An error in Anthropic's shape, {"type": "error", "error": {"type", "message"}}, its type named
// for the HTTP status (invalid_request_error, not_found_error, rate_limit_error, ...).
Json error_json(int status, const std::string& message);

// The stop reason of a finished reply: its chat finish reason ("stop", "length", "tool_calls")
// and the stop string it ended before, which is "stop_sequence" where it is one of the request's.
std::string stop_reason(const std::string& finish_reason, const std::string& stop_string,
                        const std::vector<std::string>& stop_sequences);

}  // namespace strata::anthropic
