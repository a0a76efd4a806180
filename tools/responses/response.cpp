#include "tools/responses/response.h"

#include <chrono>

#include "tools/openai/response.h"

namespace strata::responses {

namespace {

const char* part_type(bool reasoning) { return reasoning ? "reasoning_text" : "output_text"; }

Json part(bool reasoning, const std::string& text) {
    Json p = {{"type", part_type(reasoning)}, {"text", text}};
    if (!reasoning) p["annotations"] = Json::array(), p["logprobs"] = Json::array();
    return p;
}

}  // namespace

ResponseWriter::ResponseWriter(std::string model, Json echo)
    : id_(openai::random_id("resp")),
      model_(std::move(model)),
      created_at_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count()),
      echo_(std::move(echo)) {}

Json ResponseWriter::response() const {
    Json r = {{"id", id_},        {"object", "response"},        {"created_at", created_at_}, {"status", status_},
              {"error", error_},  {"incomplete_details", incomplete_}, {"model", model_},           {"output", output_},
              {"usage", usage_}};
    r.update(echo_);
    return r;
}

void ResponseWriter::event(const std::string& type, Json fields) {
    fields["type"] = type;
    fields["sequence_number"] = sequence_++;
    events_ += "event: " + type + "\ndata: " + openai::dump(fields) + "\n\n";
}

void ResponseWriter::open(Open kind) {
    if (open_ == kind) return;
    close(false);
    open_ = kind;
    const bool reasoning = kind == Open::Reasoning;
    Json item = reasoning ? Json{{"id", openai::random_id("rs")}, {"type", "reasoning"}, {"summary", Json::array()}, {"content", Json::array()}}
                          : Json{{"id", openai::random_id("msg")}, {"type", "message"}, {"status", "in_progress"},
                                 {"role", "assistant"}, {"content", Json::array()}};
    output_.push_back(item);
    const int64_t index = static_cast<int64_t>(output_.size()) - 1;
    event("response.output_item.added", {{"output_index", index}, {"item", item}});
    event("response.content_part.added", {{"item_id", item["id"]}, {"output_index", index}, {"content_index", 0}, {"part", part(reasoning, "")}});
}

void ResponseWriter::close(bool cut) {
    if (open_ == Open::None) return;
    const bool reasoning = open_ == Open::Reasoning;
    const int64_t index = static_cast<int64_t>(output_.size()) - 1;
    Json& item = output_.back();
    Json done = {{"item_id", item["id"]}, {"output_index", index}, {"content_index", 0}, {"text", text_}};
    if (!reasoning) done["logprobs"] = Json::array();
    event(reasoning ? "response.reasoning_text.done" : "response.output_text.done", std::move(done));
    event("response.content_part.done", {{"item_id", item["id"]}, {"output_index", index}, {"content_index", 0}, {"part", part(reasoning, text_)}});
    item["content"] = Json::array({part(reasoning, text_)});
    if (!reasoning) item["status"] = cut ? "incomplete" : "completed";
    event("response.output_item.done", {{"output_index", index}, {"item", item}});
    open_ = Open::None;
    text_.clear();
}

std::string ResponseWriter::start() {
    events_.clear();
    event("response.created", {{"response", response()}});
    event("response.in_progress", {{"response", response()}});
    return std::move(events_);
}

std::string ResponseWriter::next(std::string_view reasoning, std::string_view content, const std::vector<models::ChatToolCall>& calls) {
    events_.clear();
    for (const auto& [kind, text] : {std::pair{Open::Reasoning, reasoning}, std::pair{Open::Message, content}}) {
        if (text.empty()) continue;
        open(kind);
        text_ += text;
        Json delta = {{"item_id", output_.back()["id"]}, {"output_index", output_.size() - 1}, {"content_index", 0}, {"delta", text}};
        if (kind == Open::Message) delta["logprobs"] = Json::array();
        event(kind == Open::Reasoning ? "response.reasoning_text.delta" : "response.output_text.delta", std::move(delta));
    }
    for (const models::ChatToolCall& call : calls) {
        close(false);
        Json item = {{"id", openai::random_id("fc")}, {"type", "function_call"}, {"status", "in_progress"},
                     {"call_id", call.id},            {"name", call.name},      {"arguments", ""}};
        output_.push_back(item);
        const int64_t index = static_cast<int64_t>(output_.size()) - 1;
        event("response.output_item.added", {{"output_index", index}, {"item", item}});
        event("response.function_call_arguments.delta", {{"item_id", item["id"]}, {"output_index", index}, {"delta", call.arguments}});
        event("response.function_call_arguments.done",
              {{"item_id", item["id"]}, {"output_index", index}, {"name", call.name}, {"arguments", call.arguments}});
        output_.back()["arguments"] = call.arguments;
        output_.back()["status"] = "completed";
        event("response.output_item.done", {{"output_index", index}, {"item", output_.back()}});
    }
    return std::move(events_);
}

std::string ResponseWriter::finish(bool cut, const Json& usage) {
    events_.clear();
    close(cut);
    usage_ = usage;
    status_ = cut ? "incomplete" : "completed";
    if (cut) incomplete_ = {{"reason", "max_output_tokens"}};
    event(cut ? "response.incomplete" : "response.completed", {{"response", response()}});
    return std::move(events_);
}

std::string ResponseWriter::fail(const std::string& code, const std::string& message) {
    events_.clear();
    close(true);
    status_ = "failed";
    error_ = {{"code", code}, {"message", message}};
    event("response.failed", {{"response", response()}});
    return std::move(events_);
}

Json usage_json(const Json& chat_usage, int64_t reasoning_tokens) {
    const int64_t input = chat_usage.value("prompt_tokens", 0), cached = chat_usage["prompt_tokens_details"].value("cached_tokens", 0);
    // The prompt tokens evaluated are those the prefix cache takes in.
    return {{"input_tokens", input},
            {"input_tokens_details", {{"cached_tokens", cached}, {"cache_write_tokens", input - cached}}},
            {"output_tokens", chat_usage.value("completion_tokens", 0)},
            {"output_tokens_details", {{"reasoning_tokens", reasoning_tokens}}},
            {"total_tokens", chat_usage.value("total_tokens", 0)}};
}

}  // namespace strata::responses
