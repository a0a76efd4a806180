#pragma once
// Answers of the Responses API (tools/responses/request.h): the response object with its output
// items (the reasoning as a reasoning item's reasoning_text, the answer as a message's
// output_text, each call a function_call) and usage; streamed, the server-sent events that
// build it (response.created ... response.completed), each item opened, written and closed in
// turn. A whole answer is written as a stream of one piece is, so both name the same items.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/chat_template.h"
#include "tools/openai/json_fields.h"

namespace strata::responses {

using openai::Json;

class ResponseWriter {
public:
    // `echo`: the request's settings (Translated::echo); `model`: the name answers give.
    ResponseWriter(std::string model, Json echo);

    // The events that open the stream: response.created, response.in_progress.
    std::string start();
    // The events of the reply's next reasoning, answer and complete calls.
    std::string next(std::string_view reasoning, std::string_view content, const std::vector<models::ChatToolCall>& calls);
    // The events that close the open item and end the stream (response.completed, or
    // response.incomplete for an answer `cut` at max_output_tokens).
    std::string finish(bool cut, const Json& usage);
    // The event that ends a stream whose generation failed (response.failed).
    std::string fail(const std::string& code, const std::string& message);

    // The response object as it stands (after finish: whole).
    Json response() const;

private:
    enum class Open { None, Reasoning, Message };
    void event(const std::string& type, Json fields);
    void open(Open kind);
    void close(bool cut);

    std::string id_, model_;
    int64_t created_at_;
    Json echo_;
    Json output_ = Json::array();
    std::string status_ = "in_progress";
    Json incomplete_ = nullptr, error_ = nullptr, usage_ = nullptr;
    int64_t sequence_ = 0;
    Open open_ = Open::None;
    std::string text_;  // of the open item
    std::string events_;  // written by the call in progress
};

// Chat completions usage in the Responses API's shape, `reasoning_tokens` of the output tokens
// (the cache's writes: the prompt tokens evaluated, which the prefix cache takes in).
Json usage_json(const Json& chat_usage, int64_t reasoning_tokens);

}  // namespace strata::responses
