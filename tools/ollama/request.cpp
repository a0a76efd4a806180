#include "tools/ollama/request.h"

#include <algorithm>
#include <cmath>
#include <array>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "runtime/sampler.h"
#include "tools/ollama/duration.h"
#include "tools/openai/api_error.h"

namespace strata::ollama {

using openai::field;
using openai::invalid_request;
using openai::shown;

namespace {

// Options that only size a load or pick hardware (older Ollama's rope and GQA settings too),
// and the settings of mirostat, which is off unless "mirostat" asks for it: the server decides
// those, so they are accepted and change nothing.
constexpr std::array<std::string_view, 20> kInertOptions = {
    "num_ctx",  "num_batch", "num_gpu",   "main_gpu",   "low_vram",       "f16_kv",    "vocab_only",          "use_mmap",
    "use_mlock", "num_thread", "num_keep", "numa",     "logits_all",     "embedding_only", "rope_frequency_base",
    "rope_frequency_scale", "num_gqa", "penalize_newline", "mirostat_tau", "mirostat_eta"};
// Sampling options that are whole numbers: a client that writes 40.0 means 40, as Ollama reads it.
constexpr std::array<std::string_view, 3> kIntegerOptions = {"top_k", "seed", "repeat_last_n"};

// `v` as an integer where it is a float with no fraction (40.0), else as it is.
Json whole_number(const Json& v) {
    if (v.is_number_float() && std::isfinite(v.get<double>()) && v.get<double>() == std::floor(v.get<double>()) &&
        std::abs(v.get<double>()) < 9.0e15)
        return static_cast<int64_t>(v.get<double>());
    return v;
}
// Sampling options with the OpenAI field each becomes (the same name: Strata reads llama.cpp's extensions).
constexpr std::array<std::string_view, 10> kSamplingOptions = {"temperature",      "top_k",           "top_p",  "min_p",
                                                               "presence_penalty", "frequency_penalty", "repeat_penalty",
                                                               "repeat_last_n",    "seed",            "stop"};
// Samplers Strata does not have, and the value at which each is off.
constexpr std::array<std::pair<std::string_view, double>, 3> kAbsentSamplers = {{{"mirostat", 0}, {"tfs_z", 1}, {"typical_p", 1}}};

// `options` written into the OpenAI body; sampling fields left out take the CLI's defaults,
// which are Ollama's too (temperature 0.8, top-k 40, ...), not OpenAI's.
// Returns num_predict where positive, else 0.
int64_t apply_options(const Json& body, Json& out) {
    const runtime::SamplerParams defaults;
    out["temperature"] = defaults.temperature;
    out["top_k"] = defaults.top_k;
    out["top_p"] = defaults.top_p;
    out["min_p"] = defaults.min_p;
    out["repeat_penalty"] = defaults.repeat_penalty;
    out["repeat_last_n"] = defaults.penalty_last_n;
    const Json* options = field(body, "options");
    int64_t num_predict = 0;
    if (!options) return num_predict;
    if (!options->is_object()) throw invalid_request(fmt::format("'options' must be an object, not {}", shown(*options)), "options");
    for (const auto& item : options->items()) {
        const std::string& key = item.key();
        const std::string where = "options." + key;
        if (std::find(kInertOptions.begin(), kInertOptions.end(), key) != kInertOptions.end()) continue;
        if (std::find(kSamplingOptions.begin(), kSamplingOptions.end(), key) != kSamplingOptions.end()) {
            const bool whole = std::find(kIntegerOptions.begin(), kIntegerOptions.end(), key) != kIntegerOptions.end();
            if (!item.value().is_null()) out[key] = whole ? whole_number(item.value()) : item.value();
            continue;
        }
        if (key == "num_predict") {
            // -1 (for ever) and -2 (fill the context) both run to the context's end, as a chat without max_tokens does.
            const Json n = whole_number(item.value());
            if (!n.is_number_integer()) throw invalid_request(fmt::format("'{}' must be an integer", where), where);
            num_predict = std::max<int64_t>(0, n.get<int64_t>());
            continue;
        }
        const auto absent = std::find_if(kAbsentSamplers.begin(), kAbsentSamplers.end(), [&](const auto& a) { return a.first == key; });
        if (absent != kAbsentSamplers.end()) {
            if (item.value().is_number() && item.value().get<double>() == absent->second) continue;
            throw invalid_request(fmt::format("'{}' is not supported (this server has no such sampler); leave it out", where), where);
        }
        throw invalid_request(fmt::format("'{}' is not an option Strata knows; see docs/ollama.md for those it takes", where), where);
    }
    // OpenAI's ranges; a negative top_k means "off" to Ollama as 0 does here.
    if (out["top_k"].is_number_integer() && out["top_k"].get<int64_t>() < 0) out["top_k"] = 0;
    return num_predict;
}

// `format`: "json" or a JSON schema, as response_format.
void apply_format(const Json& body, Json& out) {
    const Json* format = field(body, "format");
    if (!format || (format->is_string() && format->get<std::string>().empty())) return;
    if (format->is_string() && format->get<std::string>() == "json") {
        out["response_format"] = {{"type", "json_object"}};
    } else if (format->is_object()) {
        // Not strict: keywords a grammar cannot hold (pattern, multipleOf, a number's bounds) are
        // left to the model, as Ollama (llama.cpp's converter) leaves them, instead of refused.
        out["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "format"}, {"schema", *format}, {"strict", false}}}};
    } else {
        throw invalid_request(fmt::format("'format' must be \"json\" or a JSON schema, not {}", shown(*format)), "format");
    }
}

// think: true, a level ("low", "medium", "high": gpt-oss's reasoning effort; other models reason
// as they do) or none, the reasoning apart as `thinking`; false turns it off where the template
// can (Qwen3) and leaves it out of the answer where it cannot.
void apply_think(const Json& body, Translated& t) {
    const Json* v = field(body, "think");
    if (!v || v->is_null()) return;
    const bool level = v->is_string() && (*v == "low" || *v == "medium" || *v == "high");
    if (!v->is_boolean() && !level)
        throw invalid_request(fmt::format("'think' must be true, false, \"low\", \"medium\" or \"high\", not {}", shown(*v)), "think");
    if (level && t.endpoint == openai::Endpoint::Chat) t.body["reasoning_effort"] = *v;
    if (level || v->get<bool>()) return;
    t.show_thinking = false;
    if (t.endpoint == openai::Endpoint::Chat) t.body["chat_template_kwargs"] = {{"enable_thinking", false}};
}

void refuse(const Json& body, const char* key, const std::string& why) {
    const Json* v = field(body, key);
    if (!v || (v->is_boolean() && !v->get<bool>()) || (v->is_string() && v->get<std::string>().empty()) || (v->is_array() && v->empty()))
        return;
    throw invalid_request(fmt::format("'{}' is not supported: {}", key, why), key);
}

// The fields every generating request shares.
Translated common(const Json& body, openai::Endpoint endpoint) {
    if (!body.is_object()) throw invalid_request(fmt::format("the request body must be a JSON object, not {}", shown(body)));
    Translated t;
    t.model = model_name(body);
    t.endpoint = endpoint;
    t.keep_alive = keep_alive(body);
    if (const Json* s = field(body, "stream")) {
        if (!s->is_boolean()) throw invalid_request("'stream' must be true or false", "stream");
        t.stream = s->get<bool>();
    }
    refuse(body, "images", "the models served here read text only");
    refuse(body, "logprobs", "ask /v1/chat/completions for log-probabilities");
    t.body = Json::object();
    t.body["model"] = t.model;
    t.num_predict = apply_options(body, t.body);
    apply_format(body, t.body);
    apply_think(body, t);
    return t;
}

// Ollama's messages as OpenAI's: a tool result names its tool (tool_name), not a call id.
Json openai_messages(const Json& messages) {
    if (!messages.is_array()) throw invalid_request("'messages' must be a list of messages", "messages");
    Json out = Json::array();
    for (size_t i = 0; i < messages.size(); ++i) {
        const Json& m = messages[i];
        const std::string where = fmt::format("messages[{}]", i);
        if (!m.is_object()) throw invalid_request(fmt::format("'{}' must be an object with 'role' and 'content'", where), where);
        refuse(m, "images", "the models served here read text only");
        Json msg = Json::object();
        for (const char* key : {"role", "content", "tool_calls"})
            if (const Json* v = field(m, key)) msg[key] = *v;
        if (const Json* thinking = field(m, "thinking")) msg["reasoning_content"] = *thinking;
        if (!msg.contains("content")) msg["content"] = "";
        if (msg.value("role", Json()) == "tool") msg["tool_call_id"] = openai::string_field(m, "tool_name", "");
        out.push_back(std::move(msg));
    }
    return out;
}

}  // namespace

std::string model_name(const Json& body) {
    const Json* m = body.is_object() ? field(body, "model") : nullptr;
    if (!m || !m->is_string() || m->get<std::string>().empty())
        throw invalid_request("'model' must name a model; GET /api/tags lists them", "model");
    return m->get<std::string>();
}

std::string model_or_name(const Json& body) {
    if (body.is_object() && field(body, "name") && !field(body, "model")) return openai::string_field(body, "name", "");
    return model_name(body);
}

std::optional<std::chrono::seconds> keep_alive(const Json& body) {
    const Json* k = field(body, "keep_alive");
    if (!k) return std::nullopt;
    if (k->is_number()) return seconds_duration(k->get<double>());
    if (!k->is_string()) throw invalid_request(fmt::format("'keep_alive' must be seconds or a duration, not {}", shown(*k)), "keep_alive");
    try {
        return parse_duration(k->get<std::string>());
    } catch (const UsageError& e) {
        throw invalid_request(fmt::format("'keep_alive': {} ({})", e.what(), e.hint()), "keep_alive");
    }
}

Translated translate_chat(const Json& body) {
    Translated t = common(body, openai::Endpoint::Chat);
    const Json* messages = field(body, "messages");
    t.load_only = !messages || (messages->is_array() && messages->empty());
    if (t.load_only) return t;
    t.body["messages"] = openai_messages(*messages);
    if (const Json* tools = field(body, "tools")) t.body["tools"] = *tools;
    return t;
}

Translated translate_generate(const Json& body) {
    const bool raw = openai::boolean(body, "raw");
    Translated t = common(body, raw ? openai::Endpoint::Completions : openai::Endpoint::Chat);
    refuse(body, "suffix", "this server does not fill in the middle");
    refuse(body, "template", "the model's own chat template is used (or send \"raw\": true with the prompt as the model reads it)");
    refuse(body, "context", "send the conversation to /api/chat instead");
    const std::string prompt = openai::string_field(body, "prompt", "");
    t.load_only = prompt.empty();
    if (t.load_only) return t;
    if (raw) {
        if (field(body, "tools")) throw invalid_request("'tools' need the chat template: leave out 'raw'", "tools");
        t.body["prompt"] = prompt;
        return t;
    }
    Json messages = Json::array();
    if (const std::string system = openai::string_field(body, "system", ""); !system.empty())
        messages.push_back({{"role", "system"}, {"content", system}});
    messages.push_back({{"role", "user"}, {"content", prompt}});
    t.body["messages"] = std::move(messages);
    return t;
}

bool drop_oldest_turn(Translated& t) {
    Json* messages = t.body.contains("messages") ? &t.body["messages"] : nullptr;
    if (!messages || !messages->is_array()) return false;
    const auto is_turn = [](const Json& m) { return m.value("role", Json()) != "system"; };
    const auto first = std::find_if(messages->begin(), messages->end(), is_turn);
    if (first == messages->end() || std::find_if(first + 1, messages->end(), is_turn) == messages->end()) return false;
    messages->erase(first);
    return true;
}

int32_t reply_tokens(const Translated& t, int32_t room) {
    return t.num_predict > 0 ? static_cast<int32_t>(std::min<int64_t>(t.num_predict, room)) : room;
}

EmbedRequest translate_embed(const Json& body) {
    if (!body.is_object()) throw invalid_request(fmt::format("the request body must be a JSON object, not {}", shown(body)));
    EmbedRequest e{model_name(body), Json::object(), keep_alive(body)};
    const Json* input = field(body, "input");
    if (input && !(input->is_string() || input->is_array()))
        throw invalid_request("'input' must be a text or a list of texts", "input");
    e.load_only = !input || (input->is_string() ? input->get<std::string>().empty() : input->empty());
    if (e.load_only) return e;
    e.body["input"] = *input;
    if (const Json* d = field(body, "dimensions")) e.body["dimensions"] = *d;
    // Ollama cuts an input past the context unless told not to.
    const Json* truncate = field(body, "truncate");
    if (truncate && !truncate->is_boolean()) throw invalid_request("'truncate' must be true or false", "truncate");
    e.body["truncate"] = !truncate || truncate->get<bool>();
    return e;
}

EmbedRequest translate_embeddings(const Json& body) {
    if (!body.is_object()) throw invalid_request(fmt::format("the request body must be a JSON object, not {}", shown(body)));
    EmbedRequest e{model_name(body), Json::object(), keep_alive(body)};
    const Json* prompt = field(body, "prompt");
    if (prompt && !prompt->is_string()) throw invalid_request("'prompt' must be the text to embed", "prompt");
    e.load_only = !prompt || prompt->get<std::string>().empty();
    if (!e.load_only) e.body["input"] = *prompt;
    return e;
}

}  // namespace strata::ollama
