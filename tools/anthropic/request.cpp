#include "tools/anthropic/request.h"

#include <algorithm>
#include <array>
#include <string_view>

#include <fmt/format.h>

#include "tools/openai/api_error.h"

namespace strata::anthropic {

using openai::field;
using openai::required_field;
using openai::string_at;
using openai::invalid_request;
using openai::shown;

namespace {

// Fields read below, and those with no effect on an answer (accepted as they are).
constexpr std::array<std::string_view, 14> kKnown = {"model",       "messages", "system",   "max_tokens",   "stop_sequences",
                                                     "stream",      "temperature", "top_p", "top_k",        "tools",
                                                     "tool_choice", "thinking", "metadata", "output_config"};
// (cache_control: the prefix cache keeps every prompt's blocks unasked.)
constexpr std::array<std::string_view, 7> kInert = {"service_tier", "cache_control", "speed",       "inference_geo",
                                                    "diagnostics",  "user_profile_id", "workspace_id"};

std::string block_type(const Json& block, const std::string& where) {
    if (!block.is_object()) throw invalid_request(fmt::format("'{}' must be a content block, not {}", where, shown(block)), where);
    return string_at(required_field(block, "type", where), where + ".type");
}

// A tool result's content: a text, or text blocks joined on lines of their own.
std::string result_text(const Json& content, const std::string& where) {
    if (content.is_null()) return {};
    if (content.is_string()) return content.get<std::string>();
    if (!content.is_array()) throw invalid_request(fmt::format("'{}' must be a string or text blocks", where), where);
    std::string out;
    for (size_t i = 0; i < content.size(); ++i) {
        const std::string at = fmt::format("{}[{}]", where, i);
        if (block_type(content[i], at) != "text")
            throw invalid_request(fmt::format("'{}' must be a text block: the models served here read text only", at), at);
        if (!out.empty()) out += '\n';
        out += string_at(required_field(content[i], "text", at), at + ".text");
    }
    return out;
}

// A tool_result block's text; one with is_error says so first, as chat templates have no place
// for the flag.
std::string tool_result_text(const Json& block, const std::string& where) {
    std::string text = result_text(block.value("content", Json()), where + ".content");
    const Json is_error = block.value("is_error", Json(false));
    if (!is_error.is_boolean()) throw invalid_request(fmt::format("'{}.is_error' must be a boolean", where), where + ".is_error");
    if (!is_error.get<bool>()) return text;
    return text.empty() ? "Error" : "Error: " + text;
}

// A user turn's blocks: text as the chat's text parts, each tool_result a tool message (in order).
void user_turn(const Json& content, const std::string& where, Json& out) {
    if (content.is_string()) {
        out.push_back({{"role", "user"}, {"content", content}});
        return;
    }
    Json parts = Json::array();
    const auto flush = [&] {
        if (!parts.empty()) out.push_back({{"role", "user"}, {"content", parts}});
        parts = Json::array();
    };
    for (size_t i = 0; i < content.size(); ++i) {
        const std::string at = fmt::format("{}[{}]", where, i);
        const std::string type = block_type(content[i], at);
        if (type == "text") {
            parts.push_back({{"type", "text"}, {"text", string_at(required_field(content[i], "text", at), at + ".text")}});
        } else if (type == "tool_result") {
            flush();
            out.push_back({{"role", "tool"},
                           {"tool_call_id", string_at(required_field(content[i], "tool_use_id", at), at + ".tool_use_id")},
                           {"content", tool_result_text(content[i], at)}});
        } else if (type == "image" || type == "document") {
            throw invalid_request(fmt::format("'{}' is an {} block: the models served here read text only", at, type), at);
        } else {
            throw invalid_request(fmt::format("'{}' is a {} block, which a user message cannot hold here", at, type), at);
        }
    }
    flush();
}

// An assistant turn's blocks: text as its content, thinking as its reasoning, tool_use as its calls.
void assistant_turn(const Json& content, const std::string& where, Json& out) {
    Json msg = {{"role", "assistant"}, {"content", content.is_string() ? content : Json("")}};
    if (content.is_array()) {
        std::string text, thinking;
        Json calls = Json::array();
        for (size_t i = 0; i < content.size(); ++i) {
            const std::string at = fmt::format("{}[{}]", where, i);
            const std::string type = block_type(content[i], at);
            if (type == "text") {
                text += string_at(required_field(content[i], "text", at), at + ".text");
            } else if (type == "thinking") {
                thinking += string_at(required_field(content[i], "thinking", at), at + ".thinking");
            } else if (type == "redacted_thinking") {
                continue;  // encrypted by another service: nothing a model here can read
            } else if (type == "tool_use") {
                const Json& input = required_field(content[i], "input", at);
                if (!input.is_object()) throw invalid_request(fmt::format("'{}.input' must be an object", at), at + ".input");
                calls.push_back({{"id", string_at(required_field(content[i], "id", at), at + ".id")},
                                 {"type", "function"},
                                 {"function", {{"name", string_at(required_field(content[i], "name", at), at + ".name")},
                                               {"arguments", openai::dump(input)}}}});
            } else {
                throw invalid_request(fmt::format("'{}' is a {} block, which an assistant message cannot hold here", at, type), at);
            }
        }
        msg["content"] = text;
        if (!thinking.empty()) msg["reasoning_content"] = thinking;
        if (!calls.empty()) msg["tool_calls"] = std::move(calls);
    }
    out.push_back(std::move(msg));
}

Json chat_messages(const Json& body) {
    Json out = Json::array();
    if (const Json* system = field(body, "system"); system)
        out.push_back({{"role", "system"}, {"content", system->is_string() ? *system : Json(result_text(*system, "system"))}});
    const Json* messages = field(body, "messages");
    if (!messages || !messages->is_array() || messages->empty())
        throw invalid_request("'messages' must be a non-empty array of messages", "messages");
    for (size_t i = 0; i < messages->size(); ++i) {
        const Json& m = (*messages)[i];
        const std::string where = fmt::format("messages[{}]", i);
        if (!m.is_object()) throw invalid_request(fmt::format("'{}' must be an object", where), where);
        const std::string role = string_at(required_field(m, "role", where), where + ".role");
        const Json& content = required_field(m, "content", where);
        if ((!content.is_string() && !content.is_array()) || content.empty())
            throw invalid_request(fmt::format("'{}.content' must be a non-empty string or content blocks", where), where + ".content");
        if (role == "user") {
            user_turn(content, where + ".content", out);
        } else if (role == "assistant") {
            if (i + 1 == messages->size())
                throw invalid_request(fmt::format("'{}' is an assistant message to continue (a prefill), which this server does "
                                                  "not do: end with a user message", where),
                                      where);
            assistant_turn(content, where + ".content", out);
        } else {
            throw invalid_request(fmt::format("'{}.role' must be user or assistant, not {}", where, role), where + ".role");
        }
    }
    return out;
}

Json chat_tools(const Json& tools) {
    if (!tools.is_array()) throw invalid_request("'tools' must be an array", "tools");
    Json out = Json::array();
    for (size_t i = 0; i < tools.size(); ++i) {
        const Json& t = tools[i];
        const std::string at = fmt::format("tools[{}]", i);
        if (!t.is_object()) throw invalid_request(fmt::format("'{}' must be an object", at), at);
        const std::string type = openai::string_field(t, "type", "custom");
        if (type != "custom")
            throw invalid_request(fmt::format("'{}' is the server tool {}: this server runs none; give tools with an "
                                              "input_schema",
                                              at, type),
                                  at);
        Json function = {{"name", required_field(t, "name", at)}};
        if (const Json* d = field(t, "description"); d) function["description"] = *d;
        function["parameters"] = required_field(t, "input_schema", at);
        out.push_back({{"type", "function"}, {"function", std::move(function)}});
    }
    return out;
}

// tool_choice: {"type": "auto" | "any" | "tool" (with "name") | "none", "disable_parallel_tool_use"}.
void apply_tool_choice(const Json& choice, Json& out) {
    const std::string type = choice.is_object() ? openai::string_field(choice, "type", "") : "";
    if (type == "auto" || type == "none") out["tool_choice"] = type;
    else if (type == "any") out["tool_choice"] = "required";
    else if (type == "tool") out["tool_choice"] = {{"type", "function"}, {"function", {{"name", required_field(choice, "name", "tool_choice")}}}};
    else throw invalid_request(fmt::format("'tool_choice' must be of type auto, any, tool or none, not {}", shown(choice)), "tool_choice");
    if (openai::boolean(choice, "disable_parallel_tool_use")) out["parallel_tool_calls"] = false;
}

// thinking: {"type": "enabled", "budget_tokens": N} caps the reasoning; "disabled" turns it off
// where the template can; "adaptive" leaves it to the model. display "omitted" leaves its text out.
void apply_thinking(const Json& thinking, Translated& t) {
    Json& out = t.body;
    if (!thinking.is_object()) throw invalid_request(fmt::format("'thinking' must be an object, not {}", shown(thinking)), "thinking");
    const std::string type = openai::string_field(thinking, "type", "");
    const std::string display = openai::string_field(thinking, "display", "summarized");
    if (display != "summarized" && display != "omitted")
        throw invalid_request(fmt::format("'thinking.display' must be summarized or omitted, not {}", display), "thinking.display");
    t.omit_thinking = display == "omitted";
    if (type == "enabled") {
        const Json& budget = required_field(thinking, "budget_tokens", "thinking");
        if (!budget.is_number_integer() || budget.get<int64_t>() < 0)
            throw invalid_request("'thinking.budget_tokens' must be a whole number of at least 0", "thinking.budget_tokens");
        out["thinking_budget_tokens"] = budget;
    } else if (type == "disabled") {
        out["chat_template_kwargs"] = {{"enable_thinking", false}};
    } else if (type != "adaptive") {
        throw invalid_request(fmt::format("'thinking' must be of type enabled, disabled or adaptive, not {}", shown(thinking)),
                              "thinking");
    }
}

// output_config: {"effort": low ... max (gpt-oss's reasoning effort, its highest for xhigh and
// max), "format": {"type": "json_schema", "schema"}} (held by a grammar).
void apply_output_config(const Json& config, Json& out) {
    if (!config.is_object()) throw invalid_request("'output_config' must be an object", "output_config");
    for (const auto& [key, v] : config.items())
        if (key != "effort" && key != "format") throw invalid_request(fmt::format("'output_config.{}' is not supported", key), "output_config." + key);
    if (const Json* effort = field(config, "effort"); effort) {
        const std::string level = string_at(*effort, "output_config.effort");
        out["reasoning_effort"] = level == "xhigh" || level == "max" ? "high" : level;
    }
    if (const Json* format = field(config, "format"); format) {
        if (!format->is_object() || openai::string_field(*format, "type", "") != "json_schema")
            throw invalid_request(fmt::format("'output_config.format' must be of type json_schema, not {}", shown(*format)),
                                  "output_config.format");
        out["response_format"] = {{"type", "json_schema"},
                                  {"json_schema", {{"name", "output"}, {"schema", required_field(*format, "schema", "output_config.format")}, {"strict", true}}}};
    }
}

}  // namespace

Translated translate(const Json& body, bool counting) {
    if (!body.is_object()) throw invalid_request(fmt::format("the request body must be a JSON object, not {}", shown(body)));
    for (const auto& [key, v] : body.items())
        if (std::find(kKnown.begin(), kKnown.end(), key) == kKnown.end() && std::find(kInert.begin(), kInert.end(), key) == kInert.end())
            throw invalid_request(fmt::format("'{}' is not supported by this server's /v1/messages", key), key);
    Translated t;
    t.model = string_at(required_field(body, "model", "body"), "model");
    t.body = {{"model", t.model}, {"messages", chat_messages(body)}};
    Json& out = t.body;
    if (const Json* tools = field(body, "tools"); tools && !tools->empty()) out["tools"] = chat_tools(*tools);
    if (const Json* choice = field(body, "tool_choice"); choice) apply_tool_choice(*choice, out);
    if (const Json* thinking = field(body, "thinking"); thinking) apply_thinking(*thinking, t);
    if (const Json* config = field(body, "output_config"); config) apply_output_config(*config, out);
    if (counting) return t;
    const Json* max_tokens = field(body, "max_tokens");
    if (!max_tokens) throw invalid_request("'max_tokens' is required", "max_tokens");
    out["max_tokens"] = *max_tokens;
    t.stream = openai::boolean(body, "stream");
    // Absent: the chat endpoint's defaults (docs/serving.md).
    for (const char* key : {"temperature", "top_p", "top_k"})
        if (const Json* v = field(body, key); v) out[key] = *v;
    if (const Json* stops = field(body, "stop_sequences"); stops) {
        if (!stops->is_array()) throw invalid_request("'stop_sequences' must be an array of strings", "stop_sequences");
        for (const Json& s : *stops) t.stop_sequences.push_back(string_at(s, "stop_sequences"));
        out["stop"] = *stops;
    }
    return t;
}

}  // namespace strata::anthropic
