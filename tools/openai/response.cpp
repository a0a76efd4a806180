#include "tools/openai/response.h"

#include <chrono>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace strata::openai {

using nlohmann::json;

std::string finish_reason(std::string_view stop_reason) {
    if (stop_reason == "eos" || stop_reason == "stop") return "stop";
    if (stop_reason == "length" || stop_reason == "context") return "length";
    return {};
}

CompletionMeta CompletionMeta::make(Endpoint endpoint, std::string model) {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    CompletionMeta m{endpoint, fmt::format("{}-{:016x}", endpoint == Endpoint::Chat ? "chatcmpl" : "cmpl", rng()), 0,
                     std::move(model)};
    m.created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    return m;
}

namespace {
json object_head(const CompletionMeta& m, bool chunk) {
    const char* object = m.endpoint == Endpoint::Chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
    return {{"id", m.id}, {"object", object}, {"created", m.created}, {"model", m.model}};
}

json reason_or_null(const std::string& reason) { return reason.empty() ? json(nullptr) : json(reason); }
}  // namespace

json usage_json(const runtime::GenerateResult& r) {
    const size_t n_prompt = r.prompt_tokens.size(), n_gen = r.tokens.size();
    return {{"prompt_tokens", n_prompt},
            {"completion_tokens", n_gen},
            {"total_tokens", n_prompt + n_gen},
            {"prompt_tokens_details", {{"cached_tokens", r.cached_tokens}}}};
}

json completion_json(const CompletionMeta& m, const runtime::GenerateResult& r) {
    json j = object_head(m, false);
    json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", reason_or_null(finish_reason(r.stop_reason))}};
    if (m.endpoint == Endpoint::Chat)
        choice["message"] = {{"role", "assistant"}, {"content", r.text}};
    else
        choice["text"] = r.text;
    j["choices"] = json::array({choice});
    j["usage"] = usage_json(r);
    return j;
}

json text_chunk_json(const CompletionMeta& m, std::string_view text, bool first) {
    json j = object_head(m, true);
    json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
    if (m.endpoint == Endpoint::Chat) {
        choice["delta"] = {{"content", text}};
        if (first) choice["delta"]["role"] = "assistant";
    } else {
        choice["text"] = text;
    }
    j["choices"] = json::array({choice});
    return j;
}

json final_chunk_json(const CompletionMeta& m, const std::string& reason) {
    json j = object_head(m, true);
    json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", reason_or_null(reason)}};
    if (m.endpoint == Endpoint::Chat)
        choice["delta"] = json::object();
    else
        choice["text"] = "";
    j["choices"] = json::array({choice});
    return j;
}

json usage_chunk_json(const CompletionMeta& m, const runtime::GenerateResult& r) {
    json j = object_head(m, true);
    j["choices"] = json::array();
    j["usage"] = usage_json(r);
    return j;
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace strata::openai
