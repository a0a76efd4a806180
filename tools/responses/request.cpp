#include "tools/responses/request.h"

#include <algorithm>
#include <array>
#include <string_view>

#include <fmt/format.h>

#include "tools/openai/api_error.h"

namespace strata::responses {

using openai::field;
using openai::required_field;
using openai::string_at;
using openai::invalid_request;
using openai::shown;

namespace {

// Fields with no effect on the answer a server that stores nothing gives: accepted as they are.
constexpr std::array<std::string_view, 6> kInert = {"store", "user", "safety_identifier", "prompt_cache_key", "service_tier",
                                                    "metadata"};
// Fields read below.
constexpr std::array<std::string_view, 13> kRead = {"model",     "input",        "instructions", "tools",  "tool_choice",
                                                    "stream",    "temperature",  "top_p",        "text",   "reasoning",
                                                    "truncation", "include",     "max_output_tokens"};

bool known(std::string_view key) {
    return std::find(kInert.begin(), kInert.end(), key) != kInert.end() || std::find(kRead.begin(), kRead.end(), key) != kRead.end() ||
           key == "parallel_tool_calls";
}

// A message's content: a text, or parts whose texts are joined on lines of their own (input_text,
// output_text).
std::string content_text(const Json& content, const std::string& where) {
    if (content.is_string()) return content.get<std::string>();
    if (!content.is_array()) throw invalid_request(fmt::format("'{}' must be a string or an array of parts", where), where);
    std::string out;
    for (size_t i = 0; i < content.size(); ++i) {
        const Json& part = content[i];
        const std::string at = fmt::format("{}[{}]", where, i);
        const std::string type = part.is_object() ? openai::string_field(part, "type", "") : "";
        if (type == "input_image" || type == "input_file" || type == "input_audio")
            throw invalid_request(fmt::format("'{}' is {}: the models served here read text only", at, type), at);
        if (type != "input_text" && type != "output_text" && type != "text" && type != "refusal")
            throw invalid_request(fmt::format("'{}' must be an input_text or output_text part, not {}", at, shown(part)), at);
        const Json* text = field(part, type == "refusal" ? "refusal" : "text");
        if (!text) throw invalid_request(fmt::format("'{}' has no text", at), at);
        if (!out.empty()) out += '\n';  // parts on lines of their own, as the chat endpoint joins them
        out += string_at(*text, at + ".text");
    }
    return out;
}

// The conversation of `input`, the reasoning of a turn kept for the assistant message it precedes.
class Conversation {
public:
    Json messages = Json::array();

    void add(const Json& item, const std::string& where) {
        if (!item.is_object()) throw invalid_request(fmt::format("'{}' must be an object, not {}", where, shown(item)), where);
        const std::string type = openai::string_field(item, "type", "message");
        if (type == "message") return message(item, where);
        if (type == "function_call") {
            Json& turn = assistant_turn();
            const std::string call_id = string_at(required_field(item, "call_id", where), where + ".call_id");
            turn["tool_calls"].push_back({{"id", call_id},
                                          {"type", "function"},
                                          {"function", {{"name", string_at(required_field(item, "name", where), where + ".name")},
                                                        {"arguments", string_at(required_field(item, "arguments", where), where + ".arguments")}}}});
            return;
        }
        if (type == "function_call_output") {
            const Json& output = required_field(item, "output", where);
            messages.push_back({{"role", "tool"},
                                {"tool_call_id", string_at(required_field(item, "call_id", where), where + ".call_id")},
                                {"content", content_text(output, where + ".output")}});
            return;
        }
        if (type == "reasoning") return reasoning(item, where);
        if (type == "item_reference")
            throw invalid_request(fmt::format("'{}' refers to a stored item, but this server stores none: send the item itself",
                                              where),
                                  where);
        throw invalid_request(fmt::format("'{}' is a {} item: give messages, function calls, their outputs or reasoning", where,
                                          type),
                              where);
    }

private:
    void message(const Json& item, const std::string& where) {
        std::string role = string_at(required_field(item, "role", where), where + ".role");
        if (role == "developer") role = "system";
        if (role != "user" && role != "system" && role != "assistant")
            throw invalid_request(fmt::format("'{}.role' must be user, assistant, system or developer, not {}", where, role),
                                  where + ".role");
        const std::string text = content_text(required_field(item, "content", where), where + ".content");
        if (role == "assistant") {
            Json& turn = assistant_turn();
            const std::string before = turn["content"].get<std::string>();
            turn["content"] = before.empty() ? text : before + "\n" + text;
            return;
        }
        messages.push_back({{"role", role}, {"content", text}});
    }

    // The reasoning item's text (its content, else its summary) for the next assistant message.
    void reasoning(const Json& item, const std::string& where) {
        std::string text;
        for (const char* key : {"content", "summary"}) {
            const Json* parts = field(item, key);
            if (!parts) continue;
            if (!parts->is_array()) throw invalid_request(fmt::format("'{}.{}' must be an array", where, key), where + "." + key);
            for (const Json& p : *parts)
                if (const Json* t = p.is_object() ? field(p, "text") : nullptr) text += string_at(*t, where + "." + key);
            if (!text.empty()) break;
        }
        pending_reasoning_ += text;
        reasoning_open_ = true;
    }

    // The assistant message this turn's items join: the last one while no other message follows
    // it and no reasoning opened a new turn, else a new one carrying that reasoning.
    Json& assistant_turn() {
        if (!reasoning_open_ && !messages.empty() && messages.back()["role"] == "assistant") return messages.back();
        Json turn = {{"role", "assistant"}, {"content", ""}};
        if (!pending_reasoning_.empty()) turn["reasoning_content"] = pending_reasoning_;
        pending_reasoning_.clear();
        reasoning_open_ = false;
        messages.push_back(std::move(turn));
        return messages.back();
    }

    std::string pending_reasoning_;
    bool reasoning_open_ = false;
};

Json chat_tools(const Json& tools) {
    if (!tools.is_array()) throw invalid_request("'tools' must be an array", "tools");
    Json out = Json::array();
    for (size_t i = 0; i < tools.size(); ++i) {
        const Json& t = tools[i];
        const std::string where = fmt::format("tools[{}]", i);
        const std::string type = t.is_object() ? openai::string_field(t, "type", "") : "";
        if (type != "function")
            throw invalid_request(fmt::format("'{}' is a {} tool: this server runs no built-in tools; offer functions", where,
                                              type.empty() ? shown(t) : type),
                                  where);
        Json function = {{"name", t.value("name", Json())}};
        for (const char* key : {"description", "parameters", "strict"})
            if (const Json* v = field(t, key); v) function[key] = *v;
        out.push_back({{"type", "function"}, {"function", std::move(function)}});
    }
    return out;
}

Json chat_tool_choice(const Json& choice) {
    if (choice.is_string()) return choice;
    if (choice.is_object() && openai::string_field(choice, "type", "") == "function" && field(choice, "name"))
        return {{"type", "function"}, {"function", {{"name", choice["name"]}}}};
    throw invalid_request(fmt::format("'tool_choice' must be \"auto\", \"none\", \"required\" or a function by name, not {}",
                                      shown(choice)),
                          "tool_choice");
}

// text.format: {"type": "text" | "json_object" | "json_schema", name, schema, strict}.
void apply_text(const Json& text, Json& out) {
    if (!text.is_object()) throw invalid_request("'text' must be an object", "text");
    for (const auto& [key, v] : text.items())
        if (key != "format" && !(key == "verbosity" && (v.is_null() || v == "medium")))
            throw invalid_request(fmt::format("'text.{}' is not supported", key), "text." + key);
    const Json* format = field(text, "format");
    if (!format) return;
    const std::string type = format->is_object() ? openai::string_field(*format, "type", "") : "";
    if (type == "text") return;
    if (type == "json_object") {
        out["response_format"] = {{"type", "json_object"}};
    } else if (type == "json_schema") {
        const Json* name = field(*format, "name");
        Json schema = {{"name", name ? string_at(*name, "text.format.name") : std::string("response")},
                       {"schema", format->value("schema", Json())}};
        if (const Json* strict = field(*format, "strict"); strict) schema["strict"] = *strict;
        out["response_format"] = {{"type", "json_schema"}, {"json_schema", std::move(schema)}};
    } else {
        throw invalid_request(fmt::format("'text.format' must be of type text, json_object or json_schema, not {}", shown(*format)),
                              "text.format");
    }
}

}  // namespace

Translated translate(const Json& body) {
    if (!body.is_object()) throw invalid_request(fmt::format("the request body must be a JSON object, not {}", shown(body)));
    for (const auto& [key, v] : body.items()) {
        if (key == "previous_response_id" || key == "conversation") {
            if (v.is_null()) continue;
            throw invalid_request(fmt::format("'{}' is not supported: this server stores no responses; send the whole "
                                              "conversation in 'input'",
                                              key),
                                  key);
        }
        if (key == "background" && (v.is_null() || v == false)) continue;
        if (!known(key)) throw invalid_request(fmt::format("'{}' is not supported by this server's /v1/responses", key), key);
    }
    Translated t;
    t.model = openai::string_field(body, "model", "");
    t.stream = openai::boolean(body, "stream");
    Json& out = t.body;
    out = {{"model", t.model}};
    Conversation c;
    if (const Json* instructions = field(body, "instructions"); instructions)
        c.messages.push_back({{"role", "system"}, {"content", string_at(*instructions, "instructions")}});
    const Json* input = field(body, "input");
    if (!input) throw invalid_request("'input' is required", "input");
    if (input->is_string()) {
        c.messages.push_back({{"role", "user"}, {"content", input->get<std::string>()}});
    } else if (input->is_array()) {
        for (size_t i = 0; i < input->size(); ++i) c.add((*input)[i], fmt::format("input[{}]", i));
    } else {
        throw invalid_request(fmt::format("'input' must be a string or an array of items, not {}", shown(*input)), "input");
    }
    out["messages"] = std::move(c.messages);
    if (const Json* tools = field(body, "tools"); tools && !tools->empty()) out["tools"] = chat_tools(*tools);
    if (const Json* choice = field(body, "tool_choice"); choice) out["tool_choice"] = chat_tool_choice(*choice);
    if (const Json* parallel = field(body, "parallel_tool_calls"); parallel) out["parallel_tool_calls"] = *parallel;
    for (const char* key : {"temperature", "top_p"})
        if (const Json* v = field(body, key); v) out[key] = *v;
    if (const Json* n = field(body, "max_output_tokens"); n) {
        if (!n->is_number_integer() || n->get<int64_t>() < 1)
            throw invalid_request(fmt::format("'max_output_tokens' must be a whole number of at least 1, not {}", shown(*n)),
                                  "max_output_tokens");
        out["max_tokens"] = *n;
    }
    if (const Json* text = field(body, "text"); text) apply_text(*text, out);
    if (const Json* reasoning = field(body, "reasoning"); reasoning) {
        if (!reasoning->is_object()) throw invalid_request("'reasoning' must be an object", "reasoning");
        // The reasoning is sent whole (reasoning_text), so a summary's kind changes nothing.
        if (const Json* effort = field(*reasoning, "effort"); effort) out["reasoning_effort"] = *effort;
    }
    if (const std::string truncation = openai::string_field(body, "truncation", "disabled"); truncation != "disabled")
        throw invalid_request("'truncation' must be \"disabled\": a conversation past the context is refused, not cut",
                              "truncation");
    if (const Json* include = field(body, "include"); include) {
        if (!include->is_array()) throw invalid_request("'include' must be an array", "include");
        // Reasoning is sent as text, never encrypted: asking for its encrypted form asks for nothing more.
        for (const Json& what : *include)
            if (what != "reasoning.encrypted_content")
                throw invalid_request(fmt::format("'include' of {} is not supported", shown(what)), "include");
    }
    // Absent or null: the default the response object names.
    const auto given = [&body](const char* key, Json fallback) {
        const Json* v = field(body, key);
        return v ? *v : fallback;
    };
    t.echo = {{"instructions", given("instructions", nullptr)},
              {"tools", given("tools", Json::array())},
              {"tool_choice", given("tool_choice", "auto")},
              {"parallel_tool_calls", given("parallel_tool_calls", true)},
              {"max_output_tokens", given("max_output_tokens", nullptr)},
              {"temperature", given("temperature", nullptr)},
              {"top_p", given("top_p", nullptr)},
              {"text", given("text", Json{{"format", {{"type", "text"}}}})},
              {"reasoning", given("reasoning", Json{{"effort", nullptr}, {"summary", nullptr}})},
              {"metadata", given("metadata", Json::object())},
              {"truncation", "disabled"},
              {"store", false}};
    return t;
}

}  // namespace strata::responses
