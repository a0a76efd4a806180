#include "tools/openai/request.h"

#include <algorithm>
#include <cstdint>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "models/chat_prompt.h"
#include "tools/openai/api_error.h"

namespace strata::openai {

using nlohmann::json;

std::optional<Endpoint> endpoint_from_url(std::string_view url) {
    if (url == "/v1/chat/completions") return Endpoint::Chat;
    if (url == "/v1/completions") return Endpoint::Completions;
    return std::nullopt;
}

std::string_view endpoint_url(Endpoint e) {
    return e == Endpoint::Chat ? "/v1/chat/completions" : "/v1/completions";
}

namespace {

// A short rendering of a value for error messages: a huge field must not make a huge error.
std::string shown(const json& v) {
    std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
    if (s.size() > 40) s = s.substr(0, 37) + "...";
    return s;
}

// The field, or nullptr when it is absent or null (OpenAI treats null as "not given").
const json* field(const json& body, const char* key) {
    auto it = body.find(key);
    return it == body.end() || it->is_null() ? nullptr : &*it;
}

double number_in(const json& body, const char* key, double lo, double hi, double fallback) {
    const json* v = field(body, key);
    if (!v) return fallback;
    if (!v->is_number() || v->get<double>() < lo || v->get<double>() > hi)
        throw invalid_request(fmt::format("'{}' must be a number from {} to {}, not {}", key, lo, hi, shown(*v)), key);
    return v->get<double>();
}

std::optional<int64_t> integer_at_least(const json& body, const char* key, int64_t lo) {
    const json* v = field(body, key);
    if (!v) return std::nullopt;
    if (!v->is_number_integer() || v->get<int64_t>() < lo)
        throw invalid_request(fmt::format("'{}' must be an integer of at least {}, not {}", key, lo, shown(*v)), key);
    return v->get<int64_t>();
}

bool boolean(const json& body, const char* key) {
    const json* v = field(body, key);
    if (!v) return false;
    if (!v->is_boolean()) throw invalid_request(fmt::format("'{}' must be true or false, not {}", key, shown(*v)), key);
    return v->get<bool>();
}

// Fields whose features Strata does not have: refused rather than silently ignored.
void refuse_unsupported(const json& body) {
    if (const json* v = field(body, "n"); v && *v != 1)
        throw invalid_request(fmt::format("'n' must be 1 (one choice per request), not {}", shown(*v)), "n");
    if (const json* v = field(body, "best_of"); v && *v != 1)
        throw invalid_request("'best_of' is not supported; leave it out", "best_of");
    for (const char* key : {"logprobs", "top_logprobs", "echo"})
        if (const json* v = field(body, key); v && *v != false && *v != 0)
            throw invalid_request(fmt::format("'{}' is not supported; leave it out", key), key);
    for (const char* key : {"suffix"})
        if (const json* v = field(body, key); v && *v != "")
            throw invalid_request(fmt::format("'{}' is not supported; leave it out", key), key);
    for (const char* key : {"tools", "functions", "logit_bias"})
        if (const json* v = field(body, key); v && !v->empty())
            throw invalid_request(fmt::format("'{}' is not supported; leave it out", key), key);
    if (const json* v = field(body, "response_format"); v && !(v->is_object() && v->value("type", json()) == "text"))
        throw invalid_request("only the 'text' response_format is supported", "response_format");
}

std::vector<std::string> stop_strings(const json& body) {
    const json* v = field(body, "stop");
    if (!v) return {};
    std::vector<std::string> out;
    if (v->is_string()) {
        out.push_back(v->get<std::string>());
    } else if (v->is_array() && v->size() <= kMaxStopStrings) {
        for (const json& s : *v) {
            if (!s.is_string()) throw invalid_request(fmt::format("'stop' must hold strings, not {}", shown(s)), "stop");
            out.push_back(s.get<std::string>());
        }
    } else {
        throw invalid_request(fmt::format("'stop' must be a string or a list of at most {} strings", kMaxStopStrings), "stop");
    }
    for (const auto& s : out)
        if (s.empty()) throw invalid_request("'stop' strings must not be empty", "stop");
    return out;
}

runtime::SamplerParams sampler_params(const json& body) {
    // OpenAI's defaults (temperature 1, no truncation), not the CLI's.
    runtime::SamplerParams s;
    s.temperature = static_cast<float>(number_in(body, "temperature", 0, 2, 1.0));
    s.top_p = static_cast<float>(number_in(body, "top_p", 0, 1, 1.0));
    // llama.cpp's extension; anything past the vocabulary keeps every token, as INT32_MAX does.
    s.top_k = static_cast<int32_t>(std::min<int64_t>(integer_at_least(body, "top_k", 0).value_or(0), INT32_MAX));
    s.min_p = static_cast<float>(number_in(body, "min_p", 0, 1, 0.0));              // llama.cpp's extension
    s.presence_penalty = static_cast<float>(number_in(body, "presence_penalty", -2, 2, 0.0));
    s.frequency_penalty = static_cast<float>(number_in(body, "frequency_penalty", -2, 2, 0.0));
    s.repeat_penalty = static_cast<float>(number_in(body, "repeat_penalty", 0.01, 10, 1.0));
    if (const json* v = field(body, "seed")) {
        if (!v->is_number_integer()) throw invalid_request(fmt::format("'seed' must be an integer, not {}", shown(*v)), "seed");
        s.seed = v->is_number_unsigned() ? v->get<uint64_t>() : static_cast<uint64_t>(v->get<int64_t>());
    } else {
        s.seed = std::random_device{}();
    }
    return s;
}

std::string message_content(const json& content, const std::string& where) {
    if (content.is_string()) return content.get<std::string>();
    if (!content.is_array())
        throw invalid_request(fmt::format("'{}' must be a string or a list of text parts, not {}", where, shown(content)), where);
    std::string text;
    for (const json& part : content) {
        if (!part.is_object() || part.value("type", json()) != "text" || !part.contains("text") || !part["text"].is_string())
            throw invalid_request(fmt::format("'{}' may hold only {{\"type\": \"text\", \"text\": ...}} parts", where), where);
        text += part["text"].get<std::string>();
    }
    return text;
}

std::vector<models::ChatMessage> chat_messages(const json& body) {
    const json* v = field(body, "messages");
    if (!v) throw invalid_request("'messages' is required", "messages");
    if (!v->is_array() || v->empty()) throw invalid_request("'messages' must be a non-empty list of messages", "messages");
    std::vector<models::ChatMessage> out;
    for (size_t i = 0; i < v->size(); ++i) {
        const json& m = (*v)[i];
        const std::string where = fmt::format("messages[{}]", i);
        if (!m.is_object()) throw invalid_request(fmt::format("'{}' must be an object with 'role' and 'content'", where), where);
        const json* role = field(m, "role");
        if (!role || !role->is_string())
            throw invalid_request(fmt::format("'{}.role' must be a string", where), where + ".role");
        std::string r = role->get<std::string>();
        if (r == "developer") r = "system";  // OpenAI's newer name for the system role
        if (r != "system" && r != "user" && r != "assistant")
            throw invalid_request(fmt::format("'{}.role' must be system, developer, user or assistant, not {}", where, shown(*role)),
                                  where + ".role");
        const json* content = field(m, "content");
        if (!content && r != "assistant") throw invalid_request(fmt::format("'{}.content' is required", where), where + ".content");
        out.push_back({r, content ? message_content(*content, where + ".content") : std::string()});
    }
    return out;
}

std::vector<int32_t> completion_prompt(const json& body, const models::Tokenizer& tok) {
    const json* v = field(body, "prompt");
    if (!v) throw invalid_request("'prompt' is required", "prompt");
    const json* p = v;
    if (v->is_array() && v->size() == 1 && ((*v)[0].is_string() || (*v)[0].is_array())) p = &(*v)[0];  // a batch of one
    if (p->is_string()) return tok.encode(p->get<std::string>(), tok.add_bos_default(), /*parse_special=*/true);
    if (p->is_array() && !p->empty() && (*p)[0].is_number_integer()) {
        std::vector<int32_t> ids;
        for (const json& t : *p) {
            if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= tok.n_vocab())
                throw invalid_request(fmt::format("'prompt' token {} is not an id below {}", shown(t), tok.n_vocab()), "prompt");
            ids.push_back(t.get<int32_t>());
        }
        return ids;
    }
    if (p->is_array() && !p->empty())
        throw invalid_request("'prompt' must be one prompt (a string or a list of token ids): n must be 1", "prompt");
    throw invalid_request(fmt::format("'prompt' must be a string or a list of token ids, not {}", shown(*v)), "prompt");
}

}  // namespace

CompletionRequest parse_completion_request(Endpoint endpoint, const json& body, const ModelContext& model) {
    if (!body.is_object()) throw invalid_request(fmt::format("the request body must be a JSON object, not {}", shown(body)));
    CompletionRequest req;
    req.endpoint = endpoint;
    if (const json* m = field(body, "model")) {
        if (!m->is_string()) throw invalid_request(fmt::format("'model' must be a string, not {}", shown(*m)), "model");
        req.model = m->get<std::string>();
    } else {
        req.model = model.model_id;
    }
    req.stream = boolean(body, "stream");
    if (const json* so = field(body, "stream_options")) {
        if (!req.stream) throw invalid_request("'stream_options' is only allowed when 'stream' is true", "stream_options");
        if (!so->is_object()) throw invalid_request("'stream_options' must be an object", "stream_options");
        req.include_usage = boolean(*so, "include_usage");
    }
    refuse_unsupported(body);
    req.params.sampler = sampler_params(body);
    req.params.stop = stop_strings(body);
    req.params.ignore_eos = boolean(body, "ignore_eos");  // llama.cpp's extension: fixed-length runs for benchmarks

    std::optional<int64_t> max_tokens = integer_at_least(body, "max_tokens", 1);
    const char* param = endpoint == Endpoint::Chat ? "messages" : "prompt";
    if (endpoint == Endpoint::Chat) {
        if (auto mct = integer_at_least(body, "max_completion_tokens", 1)) max_tokens = mct;
        req.prompt = models::tokenize_chat(model.tokenizer, model.chat_template, chat_messages(body));
        // The end of the assistant's turn ends the reply, beside EOS (as `strata chat` does).
        if (std::string eot = model.chat_template.end_of_turn(); !eot.empty()) req.params.stop.push_back(eot);
    } else {
        req.prompt = completion_prompt(body, model.tokenizer);
    }
    const int64_t n_prompt = static_cast<int64_t>(req.prompt.size());
    if (n_prompt == 0) throw invalid_request("the prompt is empty", param);
    // One position is left for the first generated token.
    if (n_prompt >= model.n_ctx)
        throw invalid_request(fmt::format("this model's context holds {} tokens, but the prompt has {}; shorten the {}",
                                          model.n_ctx, n_prompt, param),
                              param, "context_length_exceeded");
    const int64_t room = model.n_ctx - n_prompt;
    if (max_tokens && *max_tokens > room)
        throw invalid_request(fmt::format("this model's context holds {} tokens, but {} were requested ({} in the prompt, "
                                          "{} to generate); shorten the {} or lower max_tokens",
                                          model.n_ctx, n_prompt + *max_tokens, n_prompt, *max_tokens, param),
                              "max_tokens", "context_length_exceeded");
    const int64_t fallback = endpoint == Endpoint::Chat ? room : std::min<int64_t>(room, kDefaultCompletionTokens);
    req.params.n_predict = static_cast<int32_t>(max_tokens.value_or(fallback));
    return req;
}

json parse_json_limited(std::string_view text, const std::string& what, const std::string& code) {
    // The parser itself does not recurse. Its callback sees each array and object open with
    // the number of containers around it; one nested too deep is dropped (and the text
    // refused below), so no deep value is ever built for anything to recurse into.
    bool too_deep = false;
    const json::parser_callback_t limit = [&too_deep](int depth, json::parse_event_t event, json&) {
        const bool opens = event == json::parse_event_t::object_start || event == json::parse_event_t::array_start;
        if (!opens || depth < kMaxJsonDepth) return true;
        too_deep = true;
        return false;
    };
    // A raw NUL is never valid JSON, but nlohmann's lexer takes it for the end of the input
    // and would accept whatever came before.
    if (const size_t nul = text.find('\0'); nul != std::string_view::npos)
        throw invalid_request(fmt::format("{} is not valid JSON (byte {}): a NUL byte", what, nul), {}, code);
    json j;
    try {
        j = json::parse(text, limit);
    } catch (const json::parse_error& e) {
        // "... parse error at line 1, column 9: syntax error while parsing value - invalid
        // literal; last read: '...'": the reason, without the echo of the offending bytes.
        std::string reason = e.what();
        if (const size_t dash = reason.find(" - "); dash != std::string::npos) reason = reason.substr(dash + 3);
        if (const size_t echo = reason.find("; last read"); echo != std::string::npos) reason.resize(echo);
        throw invalid_request(fmt::format("{} is not valid JSON (byte {}): {}", what, e.byte, reason), {}, code);
    } catch (const json::exception& e) {  // out_of_range: a number past the largest double
        std::string reason = e.what();
        if (const size_t tag = reason.find("] "); tag != std::string::npos) reason = reason.substr(tag + 2);
        throw invalid_request(fmt::format("{} is not valid JSON: {}", what, reason), {}, code);
    }
    if (too_deep)
        throw invalid_request(fmt::format("{} nests arrays or objects more than {} levels deep", what, kMaxJsonDepth), {}, code);
    return j;
}

CompletionRequest parse_completion_request(Endpoint endpoint, std::string_view body, const ModelContext& model) {
    return parse_completion_request(endpoint, parse_json_limited(body, "the request body", "invalid_json"), model);
}

}  // namespace strata::openai
