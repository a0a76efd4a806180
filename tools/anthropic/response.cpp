#include "tools/anthropic/response.h"

#include <algorithm>

#include "tools/openai/response.h"

namespace strata::anthropic {

MessageWriter::MessageWriter(std::string model, int64_t prompt_tokens, int64_t cached_tokens)
    : id_(openai::random_id("msg")), model_(std::move(model)), usage_{prompt_tokens, cached_tokens, 0} {}

Json MessageWriter::message() const {
    return {{"id", id_},
            {"type", "message"},
            {"role", "assistant"},
            {"model", model_},
            {"content", content_},
            {"stop_reason", stop_reason_},
            {"stop_sequence", stop_sequence_},
            {"usage",
             {{"input_tokens", usage_.prompt_tokens - usage_.cached_tokens},
              {"cache_creation_input_tokens", 0},
              {"cache_read_input_tokens", usage_.cached_tokens},
              {"output_tokens", usage_.output_tokens}}}};
}

void MessageWriter::event(const std::string& type, Json fields) {
    fields["type"] = type;
    events_ += "event: " + type + "\ndata: " + openai::dump(fields) + "\n\n";
}

void MessageWriter::open(Open kind) {
    if (open_ == kind) return;
    close();
    open_ = kind;
    content_.push_back(kind == Open::Thinking ? Json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}
                                              : Json{{"type", "text"}, {"text", ""}});
    event("content_block_start", {{"index", content_.size() - 1}, {"content_block", content_.back()}});
}

void MessageWriter::close() {
    if (open_ == Open::None) return;
    event("content_block_stop", {{"index", content_.size() - 1}});
    open_ = Open::None;
}

std::string MessageWriter::start() {
    events_.clear();
    event("message_start", {{"message", message()}});
    event("ping", Json::object());
    return std::move(events_);
}

std::string MessageWriter::next(std::string_view thinking, std::string_view text, const std::vector<models::ChatToolCall>& calls) {
    events_.clear();
    for (const auto& [kind, piece] : {std::pair{Open::Thinking, thinking}, std::pair{Open::Text, text}}) {
        if (piece.empty()) continue;
        open(kind);
        const bool reasoning = kind == Open::Thinking;
        content_.back()[reasoning ? "thinking" : "text"].get_ref<std::string&>() += piece;
        event("content_block_delta",
              {{"index", content_.size() - 1},
               {"delta", {{"type", reasoning ? "thinking_delta" : "text_delta"}, {reasoning ? "thinking" : "text", piece}}}});
    }
    for (const models::ChatToolCall& call : calls) {
        close();
        Json input = Json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
        if (!input.is_object()) input = Json::object();  // (a call's arguments are an object by its grammar)
        content_.push_back({{"type", "tool_use"}, {"id", call.id}, {"name", call.name}, {"input", Json::object()}});
        const size_t index = content_.size() - 1;
        event("content_block_start", {{"index", index}, {"content_block", content_.back()}});
        event("content_block_delta", {{"index", index}, {"delta", {{"type", "input_json_delta"}, {"partial_json", openai::dump(input)}}}});
        event("content_block_stop", {{"index", index}});
        content_.back()["input"] = std::move(input);
    }
    return std::move(events_);
}

std::string MessageWriter::finish(const std::string& stop_reason, const std::string& stop_sequence, int64_t output_tokens,
                                  int64_t cached_tokens) {
    events_.clear();
    close();
    stop_reason_ = stop_reason;
    if (stop_reason == "stop_sequence") stop_sequence_ = stop_sequence;  // (null for the template's end of turn)
    usage_.output_tokens = output_tokens;
    usage_.cached_tokens = cached_tokens;
    // The usage as it ends: message_start counted the prompt before the cache was known.
    const Json usage = message()["usage"];
    event("message_delta", {{"delta", {{"stop_reason", stop_reason_}, {"stop_sequence", stop_sequence_}}},
                            {"usage", {{"input_tokens", usage["input_tokens"]},
                                       {"cache_read_input_tokens", usage["cache_read_input_tokens"]},
                                       {"output_tokens", output_tokens}}}});
    event("message_stop", Json::object());
    return std::move(events_);
}

std::string MessageWriter::error(int status, const std::string& message) {
    return "event: error\ndata: " + openai::dump(error_json(status, message)) + "\n\n";
}

Json error_json(int status, const std::string& message) {
    const char* type = status == 401   ? "authentication_error"
                       : status == 403 ? "permission_error"
                       : status == 404 ? "not_found_error"
                       : status == 413 ? "request_too_large"
                       : status == 429 ? "rate_limit_error"
                       : status == 503 ? "overloaded_error"
                       : status >= 500 ? "api_error"
                                       : "invalid_request_error";
    return {{"type", "error"}, {"error", {{"type", type}, {"message", message}}}};
}

std::string stop_reason(const std::string& finish_reason, const std::string& stop_string, const std::vector<std::string>& stop_sequences) {
    if (finish_reason == "tool_calls") return "tool_use";
    if (finish_reason == "length") return "max_tokens";
    const bool asked = std::find(stop_sequences.begin(), stop_sequences.end(), stop_string) != stop_sequences.end();
    return !stop_string.empty() && asked ? "stop_sequence" : "end_turn";
}

}  // namespace strata::anthropic
