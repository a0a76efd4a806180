#include "tools/openai/response.h"

#include <algorithm>
#include <chrono>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/text_stream.h"

namespace strata::openai {

std::string finish_reason(std::string_view stop_reason) {
    if (stop_reason == "eos" || stop_reason == "stop") return "stop";
    if (stop_reason == "length" || stop_reason == "context") return "length";
    return {};
}

namespace {
std::mt19937_64& rng() {
    thread_local std::mt19937_64 r{std::random_device{}()};
    return r;
}

Json object_head(const CompletionMeta& m, bool chunk) {
    const char* object = m.endpoint == Endpoint::Chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
    return {{"id", m.id}, {"object", object}, {"created", m.created}, {"model", m.model}};
}

Json reason_or_null(const std::string& reason) { return reason.empty() ? Json(nullptr) : Json(reason); }

Json tool_call_json(const models::ChatToolCall& c) {
    return {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
}

// A token as the chat shape names it: its text (invalid UTF-8 replaced when written) and bytes.
Json token_entry(const std::string& piece, float logprob) {
    Json bytes = Json::array();
    for (unsigned char c : piece) bytes.push_back(c);
    return {{"token", piece}, {"logprob", logprob}, {"bytes", bytes}};
}
}  // namespace

CompletionMeta CompletionMeta::make(Endpoint endpoint, std::string model) {
    CompletionMeta m{endpoint, fmt::format("{}-{:016x}", endpoint == Endpoint::Chat ? "chatcmpl" : "cmpl", rng()()), 0,
                     std::move(model)};
    m.created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    return m;
}

std::string random_id(std::string_view prefix) { return fmt::format("{}_{:016x}", prefix, rng()()); }

std::string tool_call_id(const models::ToolCallSyntax& syntax) {
    static constexpr char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    std::string id = syntax.with_id ? "" : "call_";
    for (int i = 0; i < (syntax.with_id ? 9 : 24); ++i) id += kAlnum[rng()() % (sizeof(kAlnum) - 1)];
    return id;
}

Json logprobs_json(Endpoint endpoint, std::span<const runtime::SampledLogprobs> tokens, const models::Tokenizer& tok, size_t offset) {
    if (endpoint == Endpoint::Chat) {
        Json content = Json::array();
        for (const auto& t : tokens) {
            Json e = token_entry(tok.piece(t.chosen.token), t.chosen.logprob);
            Json top = Json::array();
            for (const auto& alt : t.top) top.push_back(token_entry(tok.piece(alt.token), alt.logprob));
            e["top_logprobs"] = std::move(top);
            content.push_back(std::move(e));
        }
        return {{"content", std::move(content)}, {"refusal", nullptr}};
    }
    Json pieces = Json::array(), lps = Json::array(), tops = Json::array(), offsets = Json::array();
    for (const auto& t : tokens) {
        const std::string& piece = tok.piece(t.chosen.token);
        pieces.push_back(piece);
        lps.push_back(t.chosen.logprob);
        Json top = Json::object();
        for (const auto& alt : t.top) top[tok.piece(alt.token)] = alt.logprob;
        tops.push_back(std::move(top));
        offsets.push_back(offset);
        offset += runtime::utf8_characters(piece);
    }
    return {{"tokens", pieces}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

Choice make_choice(int index, const runtime::GenerateResult& r, const CompletionRequest& req) {
    Choice c;
    c.index = index;
    c.finish_reason = finish_reason(r.stop_reason);
    c.text = r.text;
    if (req.reasoning) {
        models::ReasoningParts parts = models::split_reasoning(r.text, *req.reasoning);
        c.reasoning = std::move(parts.reasoning);
        c.text = std::move(parts.content);
    }
    if (req.tools) {
        models::ParsedReply reply = models::parse_reply(c.text, *req.tools, c.finish_reason == "length");
        c.text = std::move(reply.content);
        c.tool_calls = std::move(reply.calls);
        for (auto& call : c.tool_calls)
            if (call.id.empty()) call.id = tool_call_id(*req.tools);
        // A reply cut short keeps "length": its last call may be missing.
        if (!c.tool_calls.empty() && c.finish_reason == "stop") c.finish_reason = "tool_calls";
    }
    if (req.params.n_logprobs >= 0) c.logprobs = r.logprobs;
    return c;
}

Json usage_json(std::span<const runtime::GenerateResult> results) {
    const size_t n_prompt = results.empty() ? 0 : results[0].prompt_tokens.size();
    size_t n_gen = 0;
    for (const auto& r : results) n_gen += r.tokens.size();
    const int cached = results.empty() ? 0 : results[0].cached_tokens;
    // The choices decode together: their passes over the longest one's time.
    const double prefill_s = results.empty() ? 0 : results[0].prefill_seconds;
    // Tokens decoded, not passes: a pass that verifies a draft keeps several.
    double decode_s = 0;
    int decoded = 0;
    for (const auto& r : results) decode_s = std::max(decode_s, r.decode_seconds), decoded += r.decode_tokens();
    const size_t evaluated = n_prompt - std::min(n_prompt, static_cast<size_t>(cached));
    return {{"prompt_tokens", n_prompt},
            {"completion_tokens", n_gen},
            {"total_tokens", n_prompt + n_gen},
            {"prompt_tokens_details", {{"cached_tokens", cached}}},
            // Strata's extension (llama.cpp's server has its own `timings`): what the chat page shows per reply.
            {"timings", {{"prefill_seconds", prefill_s}, {"decode_seconds", decode_s},
                         {"prompt_tokens_per_s", prefill_s > 0 ? static_cast<double>(evaluated) / prefill_s : 0.0},
                         {"decode_tokens_per_s", decode_s > 0 ? decoded / decode_s : 0.0}}}};
}

Json completion_json(const CompletionMeta& m, std::span<const Choice> choices, const Json& usage, const models::Tokenizer& tok) {
    Json j = object_head(m, false);
    Json list = Json::array();
    for (const Choice& c : choices) {
        const Json logprobs = c.logprobs ? logprobs_json(m.endpoint, *c.logprobs, tok, 0) : Json(nullptr);
        Json choice = {{"index", c.index}, {"logprobs", logprobs}, {"finish_reason", reason_or_null(c.finish_reason)}};
        if (m.endpoint == Endpoint::Chat) {
            Json message = {{"role", "assistant"}, {"content", c.text}};
            if (!c.reasoning.empty()) message["reasoning_content"] = c.reasoning;
            if (!c.tool_calls.empty()) {
                if (c.text.empty()) message["content"] = nullptr;
                Json calls = Json::array();
                for (const auto& call : c.tool_calls) calls.push_back(tool_call_json(call));
                message["tool_calls"] = std::move(calls);
            }
            choice["message"] = std::move(message);
        } else {
            choice["text"] = c.text;
        }
        list.push_back(std::move(choice));
    }
    j["choices"] = std::move(list);
    j["usage"] = usage;
    return j;
}

Json text_chunk_json(const CompletionMeta& m, int index, std::string_view text, bool first, const Json& logprobs,
                     std::string_view reasoning) {
    Json j = object_head(m, true);
    Json choice = {{"index", index}, {"logprobs", logprobs}, {"finish_reason", nullptr}};
    if (m.endpoint == Endpoint::Chat) {
        choice["delta"] = Json::object();
        if (!reasoning.empty()) choice["delta"]["reasoning_content"] = reasoning;
        if (!text.empty() || reasoning.empty()) choice["delta"]["content"] = text;
        if (first) choice["delta"]["role"] = "assistant";
    } else {
        choice["text"] = text;
    }
    j["choices"] = Json::array({choice});
    return j;
}

Json tool_calls_chunk_json(const CompletionMeta& m, int index, std::span<const models::ChatToolCall> calls, size_t first,
                           bool first_chunk) {
    Json j = object_head(m, true);
    Json deltas = Json::array();
    for (size_t i = 0; i < calls.size(); ++i) {
        Json d = tool_call_json(calls[i]);
        d["index"] = first + i;
        deltas.push_back(std::move(d));
    }
    Json delta = {{"tool_calls", std::move(deltas)}};
    if (first_chunk) delta["role"] = "assistant";
    j["choices"] = Json::array({{{"index", index}, {"delta", std::move(delta)}, {"logprobs", nullptr}, {"finish_reason", nullptr}}});
    return j;
}

Json final_chunk_json(const CompletionMeta& m, int index, const std::string& reason) {
    Json j = object_head(m, true);
    Json choice = {{"index", index}, {"logprobs", nullptr}, {"finish_reason", reason_or_null(reason)}};
    if (m.endpoint == Endpoint::Chat)
        choice["delta"] = Json::object();
    else
        choice["text"] = "";
    j["choices"] = Json::array({choice});
    return j;
}

Json usage_chunk_json(const CompletionMeta& m, const Json& usage) {
    Json j = object_head(m, true);
    j["choices"] = Json::array();
    j["usage"] = usage;
    return j;
}

}  // namespace strata::openai
