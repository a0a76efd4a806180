#include "tools/ollama/response.h"

#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "models/chat_reasoning.h"
#include "models/chat_template.h"
#include "models/gguf_file.h"
#include "runtime/sampler.h"

namespace strata::ollama {

namespace {

int64_t to_ns(double seconds) { return static_cast<int64_t>(seconds * 1e9); }

std::string done_reason(const std::string& stop_reason) {
    return stop_reason == "length" || stop_reason == "context" ? "length" : "stop";
}

Json calls_json(std::span<const models::ChatToolCall> calls) {
    Json out = Json::array();
    for (const auto& c : calls) {
        Json args = Json::parse(c.arguments, nullptr, false);
        if (args.is_discarded()) args = Json::object();  // the grammar wrote it: never, but no crash for it
        out.push_back({{"function", {{"name", c.name}, {"arguments", std::move(args)}}}});
    }
    return out;
}

Json head(const std::string& model) { return {{"model", model}, {"created_at", timestamp()}}; }

void put_reply(Api api, Json& j, std::string_view text, std::span<const models::ChatToolCall> calls, std::string_view thinking) {
    if (api == Api::Generate) {
        j["response"] = text;
        if (!thinking.empty()) j["thinking"] = thinking;
        return;
    }
    Json message = {{"role", "assistant"}, {"content", text}};
    if (!thinking.empty()) message["thinking"] = thinking;
    if (!calls.empty()) message["tool_calls"] = calls_json(calls);
    j["message"] = std::move(message);
}

}  // namespace

std::string timestamp(std::optional<int64_t> unix_seconds) {
    using namespace std::chrono;
    const auto now = system_clock::now();
    const int64_t ns = unix_seconds ? *unix_seconds * 1000000000 : duration_cast<nanoseconds>(now.time_since_epoch()).count();
    const std::time_t secs = static_cast<std::time_t>(ns / 1000000000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:09}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                       tm.tm_sec, ns % 1000000000);
}

Json item_json(Api api, const std::string& model, std::string_view text, std::span<const models::ChatToolCall> calls,
               std::string_view thinking) {
    Json j = head(model);
    put_reply(api, j, text, calls, thinking);
    j["done"] = false;
    return j;
}

Json done_json(Api api, const std::string& model, const runtime::GenerateResult& r, const Timings& t, std::string_view text,
               std::span<const models::ChatToolCall> calls, std::string_view thinking) {
    Json j = head(model);
    put_reply(api, j, text, calls, thinking);
    j["done"] = true;
    j["done_reason"] = done_reason(r.stop_reason);
    j["total_duration"] = to_ns(t.total_seconds);
    j["load_duration"] = to_ns(t.load_seconds);
    j["prompt_eval_count"] = r.prompt_tokens.size();  // the prompt's tokens, cached ones too (Ollama's "tokens in the prompt")
    j["prompt_eval_duration"] = to_ns(r.prefill_seconds);
    j["eval_count"] = r.tokens.size();
    j["eval_duration"] = to_ns(r.decode_seconds);
    return j;
}

Json load_json(Api api, const std::string& model, bool unloading) {
    Json j = head(model);
    put_reply(api, j, "", {}, {});
    j["done"] = true;
    j["done_reason"] = unloading ? "unload" : "load";
    return j;
}

std::string digest(const models::LocalModel& m) {
    // FNV-1a over what names this version of the file, spread over 256 bits.
    const std::string key = fmt::format("{}|{}|{}", m.path.string(), m.size_bytes, m.modified);
    std::string out;
    for (uint64_t round = 0; round < 4; ++round) {
        uint64_t h = 0xcbf29ce484222325ull ^ round;
        for (unsigned char c : key) h = (h ^ c) * 0x100000001b3ull;
        out += fmt::format("{:016x}", h);
    }
    return out;
}

Json details_json(const models::LocalModel& m) {
    return {{"parent_model", ""},
            {"format", "gguf"},
            {"family", m.architecture},
            {"families", Json::array({m.architecture})},
            {"parameter_size", models::parameter_size(m.parameters)},
            {"quantization_level", m.quantization}};
}

Json tags_json(std::span<const models::LocalModel> models) {
    Json list = Json::array();
    for (const auto& m : models)
        list.push_back({{"name", m.id},
                        {"model", m.id},
                        {"modified_at", timestamp(m.modified)},
                        {"size", m.size_bytes},
                        {"digest", digest(m)},
                        {"details", details_json(m)},
                        {"context_length", m.context_length}});  // Strata's: the context it was trained for
    return {{"models", std::move(list)}};
}

Json show_json(const models::LocalModel& m, const models::GgufFile& header, std::string_view chat_template) {
    Json info = Json::object();
    for (const auto& [key, value] : header.metadata()) {
        if (value.type == models::GgufType::ARRAY) continue;  // the vocabulary and its scores: megabytes nobody reads here
        if (value.type == models::GgufType::STRING) info[key] = value.as_string(key);
        else if (value.type == models::GgufType::BOOL) info[key] = value.as_bool(key);
        else if (value.is_integer()) info[key] = value.as_int(key);
        else info[key] = value.as_float(key);
    }
    info["general.parameter_count"] = m.parameters;
    const models::ChatTemplate tmpl = models::ChatTemplate::from_gguf(header, chat_template);
    Json capabilities = Json::array({"completion", "embedding"});
    try {
        models::tool_call_syntax(tmpl.family());
        capabilities.push_back("tools");
    } catch (const UsageError&) {
        // a family without a tool format
    }
    if (models::reasoning_style(tmpl)) capabilities.push_back("thinking");
    const runtime::SamplerParams d;
    return {{"modelfile", fmt::format("# Served by Strata from the GGUF file itself\nFROM {}\n", m.path.string())},
            {"parameters", fmt::format("temperature {}\ntop_k {}\ntop_p {}\nmin_p {}\nrepeat_last_n {}", d.temperature, d.top_k,
                                       d.top_p, d.min_p, d.penalty_last_n)},
            {"template", header.get_string_opt("tokenizer.chat_template").value_or(std::string(chat_family_name(tmpl.family())))},
            {"details", details_json(m)},
            {"model_info", std::move(info)},
            {"capabilities", std::move(capabilities)},
            {"modified_at", timestamp(m.modified)}};
}

Json running_json(const models::LocalModel& m, uint64_t bytes, int n_ctx, std::optional<std::chrono::system_clock::time_point> expires) {
    // "Never" as Ollama writes it for keep_alive -1: a time far ahead.
    const int64_t until = expires ? std::chrono::duration_cast<std::chrono::seconds>(expires->time_since_epoch()).count() : 11010000000ll;
    return {{"name", m.id},   {"model", m.id},         {"size", bytes},           {"digest", digest(m)},
            {"details", details_json(m)}, {"expires_at", timestamp(until)}, {"size_vram", 0}, {"context_length", n_ctx}};
}

Json embed_json(const std::string& model, std::span<const runtime::GenerateResult> results, const Timings& t) {
    Json vectors = Json::array();
    size_t tokens = 0;
    for (const auto& r : results) {
        vectors.push_back(r.embedding);
        tokens += r.prompt_tokens.size();
    }
    return {{"model", model},
            {"embeddings", std::move(vectors)},
            {"total_duration", to_ns(t.total_seconds)},
            {"load_duration", to_ns(t.load_seconds)},
            {"prompt_eval_count", tokens}};
}

}  // namespace strata::ollama
