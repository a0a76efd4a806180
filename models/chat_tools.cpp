#include "models/chat_tools.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "models/chat_text.h"
#include "models/py_json.h"

namespace strata::models {

using nlohmann::ordered_json;

namespace {

// Jinja's trim filter (Python's str.strip()).
std::string trim(std::string_view s) { return std::string(py_strip(s)); }

ordered_json parse_tools(std::string_view tools_json) {
    if (tools_json.empty()) return ordered_json::array();
    ordered_json tools = ordered_json::parse(tools_json, nullptr, false);
    if (!tools.is_array()) throw UsageError("the tools must be a JSON list of tool objects");
    for (const auto& t : tools)
        if (!t.is_object() || !t.contains("function") || !t["function"].is_object())
            throw UsageError("each tool must be {\"type\": \"function\", \"function\": {...}}");
    return tools;
}

// A call's arguments as the templates' `tojson` writes them.
std::string arguments_json(const ChatToolCall& c) {
    const ordered_json args = ordered_json::parse(c.arguments, nullptr, false);
    if (args.is_discarded())
        throw UsageError(fmt::format("the arguments of the call to '{}' are not JSON", c.name), "send them as a JSON object in a string");
    return py_json(args);
}

// The tools as Qwen2.5's and Qwen3's templates offer them, ending the system turn.
std::string hermes_tools(const ordered_json& tools) {
    std::string out = "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                      "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
    for (const auto& t : tools) out += "\n" + py_json(t);
    return out + "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
                 "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
                 "</tool_call><|im_end|>\n";
}

std::string hermes_call(const ChatToolCall& c) {
    return "<tool_call>\n{\"name\": \"" + c.name + "\", \"arguments\": " + arguments_json(c) + "}\n</tool_call>";
}

// Tool results: a run of them in one user turn, each in <tool_response> tags.
std::string hermes_result(const std::vector<ChatMessage>& msgs, size_t i) {
    std::string out;
    if (i == 0 || msgs[i - 1].role != "tool") out += "<|im_start|>user";
    out += "\n<tool_response>\n" + msgs[i].content + "\n</tool_response>";
    if (i + 1 == msgs.size() || msgs[i + 1].role != "tool") out += "<|im_end|>\n";
    return out;
}

// Qwen2.5-Instruct's template.
std::string render_hermes(const std::string& default_system, const std::vector<ChatMessage>& msgs, const ordered_json& tools,
                          bool add_generation_prompt) {
    std::string out;
    const bool first_system = !msgs.empty() && msgs[0].role == "system";
    const std::string system = first_system ? msgs[0].content : default_system;
    if (!tools.empty()) {
        out += "<|im_start|>system\n" + system + "\n\n" + hermes_tools(tools);
    } else if (!system.empty()) {
        out += "<|im_start|>system\n" + system + "<|im_end|>\n";
    }
    for (size_t i = 0; i < msgs.size(); ++i) {
        const ChatMessage& m = msgs[i];
        if (m.role == "user" || (m.role == "system" && i > 0) || (m.role == "assistant" && m.tool_calls.empty())) {
            out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
        } else if (m.role == "assistant") {
            out += "<|im_start|>assistant";
            if (!m.content.empty()) out += "\n" + m.content;
            for (const ChatToolCall& c : m.tool_calls) out += "\n" + hermes_call(c);
            out += "<|im_end|>\n";
        } else if (m.role == "tool") {
            out += hermes_result(msgs, i);
        }
    }
    if (add_generation_prompt) out += "<|im_start|>assistant\n";
    return out;
}

// The last user message that is not tool results the model wrapped itself (Qwen3's last query).
size_t last_query(const std::vector<ChatMessage>& msgs) {
    for (size_t i = msgs.size(); i-- > 0;) {
        const std::string& c = msgs[i].content;
        if (msgs[i].role == "user" && !(c.starts_with("<tool_response>") && c.ends_with("</tool_response>"))) return i;
    }
    return msgs.size() - 1;
}

}  // namespace

std::string render_qwen3(const std::vector<ChatMessage>& msgs, std::string_view tools_json, bool add_generation_prompt) {
    const ordered_json tools = parse_tools(tools_json);
    std::string out;
    const bool first_system = !msgs.empty() && msgs[0].role == "system";
    if (!tools.empty()) out += "<|im_start|>system\n" + (first_system ? msgs[0].content + "\n\n" : "") + hermes_tools(tools);
    else if (first_system) out += "<|im_start|>system\n" + msgs[0].content + "<|im_end|>\n";
    const size_t query = last_query(msgs);
    for (size_t i = 0; i < msgs.size(); ++i) {
        const ChatMessage& m = msgs[i];
        if (m.role == "user" || (m.role == "system" && i > 0)) {
            out += fmt::format("<|im_start|>{}\n{}<|im_end|>\n", m.role, m.content);
        } else if (m.role == "tool") {
            out += hermes_result(msgs, i);
        } else if (m.role == "assistant") {
            std::string_view content = m.content, reasoning = m.reasoning;
            if (const size_t end = content.rfind("</think>"); reasoning.empty() && end != std::string_view::npos) {
                // reasoning: the text before the first </think>, after its last <think>; content: after the last </think>.
                std::string_view before = rstrip_chars(content.substr(0, content.find("</think>")), "\n");
                if (const size_t open = before.rfind("<think>"); open != std::string_view::npos) before = before.substr(open + 7);
                reasoning = lstrip_chars(before, "\n");
                content = lstrip_chars(content.substr(end + 8), "\n");
            }
            if (i > query && (i + 1 == msgs.size() || !reasoning.empty()))
                out += fmt::format("<|im_start|>assistant\n<think>\n{}\n</think>\n\n{}", strip_chars(reasoning, "\n"),
                                   lstrip_chars(content, "\n"));
            else
                out += fmt::format("<|im_start|>assistant\n{}", content);
            for (size_t k = 0; k < m.tool_calls.size(); ++k) out += (k > 0 || !content.empty() ? "\n" : "") + hermes_call(m.tool_calls[k]);
            out += "<|im_end|>\n";
        }
    }
    if (add_generation_prompt) out += "<|im_start|>assistant\n";
    return out;
}

// Meta-Llama-3.1-Instruct's template, the tools in the first user turn.
std::string render_llama31(const std::vector<ChatMessage>& all, std::string_view tools_json, bool add_generation_prompt,
                           const std::string& date) {
    const ordered_json tools = parse_tools(tools_json);
    std::vector<ChatMessage> msgs = all;
    std::string system;
    if (!msgs.empty() && msgs[0].role == "system") {
        system = trim(msgs[0].content);
        msgs.erase(msgs.begin());
    }
    std::string out = "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n";
    if (!tools.empty()) out += "Environment: ipython\n";
    out += "Cutting Knowledge Date: December 2023\nToday Date: " + date + "\n\n" + system + "<|eot_id|>";
    if (!tools.empty()) {
        if (msgs.empty()) throw UsageError("Llama 3.1's template puts the tools in the first user message, and there is none");
        out += "<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a JSON for a "
               "function call with its proper arguments that best answers the given prompt.\n\nRespond in the format "
               "{\"name\": function name, \"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n";
        for (const auto& t : tools) out += py_json(t, 4) + "\n\n";
        out += trim(msgs[0].content) + "<|eot_id|>";
        msgs.erase(msgs.begin());
    }
    for (const ChatMessage& m : msgs) {
        if (m.role == "tool") {
            out += "<|start_header_id|>ipython<|end_header_id|>\n\n" + py_json(ordered_json(m.content)) + "<|eot_id|>";
        } else if (!m.tool_calls.empty()) {
            if (m.tool_calls.size() != 1)
                throw UsageError("Llama 3.1's template takes one tool call per assistant message", "send the calls in messages of their own");
            const ChatToolCall& c = m.tool_calls[0];
            out += "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"" + c.name + "\", \"parameters\": " +
                   arguments_json(c) + "}<|eot_id|>";
        } else {
            out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) + "<|eot_id|>";
        }
    }
    if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
    return out;
}

// Mistral-Nemo-Instruct's template: the tools just before the last user turn, the system
// prompt in front of the last message when that is a user turn (v7: system turns where they
// stand; v3: "[INST] " and a space before each trimmed answer).
std::string render_mistral(const std::vector<ChatMessage>& all, std::string_view tools_json, ChatDialect::Inst inst) {
    const ordered_json tools = parse_tools(tools_json);
    const bool system_turns = inst == ChatDialect::Inst::MistralV7, v3 = inst == ChatDialect::Inst::MistralV3;
    std::vector<ChatMessage> msgs = all;
    std::optional<std::string> system;
    if (!system_turns && !msgs.empty() && msgs[0].role == "system") {
        system = msgs[0].content;
        msgs.erase(msgs.begin());
    }
    const ChatMessage* last_user = nullptr;
    for (const ChatMessage& m : msgs)
        if (m.role == "user") last_user = &m;
    std::string out = "<s>";
    for (size_t i = 0; i < msgs.size(); ++i) {
        const ChatMessage& m = msgs[i];
        if (m.role == "user") {
            // The template compares messages as values: a user turn equal to the last one gets the tools too.
            if (!tools.empty() && m.content == last_user->content && m.tool_calls.empty()) {
                out += "[AVAILABLE_TOOLS][";
                for (size_t t = 0; t < tools.size(); ++t) {
                    out += "{\"type\": \"function\", \"function\": {";
                    bool first = true;
                    for (const auto& [key, val] : tools[t]["function"].items()) {
                        if (key == "return") continue;
                        out += (first ? "" : ", ") + ("\"" + key + "\": ") + (val.is_string() ? "\"" + val.get<std::string>() + "\"" : py_json(val));
                        first = false;
                    }
                    out += t + 1 < tools.size() ? "}}, " : "}}]";
                }
                out += "[/AVAILABLE_TOOLS]";
            }
            out += (v3 ? "[INST] " : "[INST]") + (i + 1 == msgs.size() && system ? *system + "\n\n" : "") + m.content + "[/INST]";
        } else if (!m.tool_calls.empty()) {
            out += "[TOOL_CALLS][";
            for (size_t c = 0; c < m.tool_calls.size(); ++c) {
                const ChatToolCall& call = m.tool_calls[c];
                if (call.id.size() != 9) throw UsageError("Mistral's template takes tool call ids of 9 letters and digits");
                out += "{\"name\": " + py_json(ordered_json(call.name)) + ", \"arguments\": " + arguments_json(call) + ", \"id\": \"" +
                       call.id + "\"}" + (c + 1 < m.tool_calls.size() ? ", " : "]</s>");
            }
        } else if (m.role == "assistant") {
            out += (v3 ? " " + trim(m.content) : m.content) + "</s>";
        } else if (m.role == "tool") {
            if (m.tool_call_id.size() != 9) throw UsageError("Mistral's template takes tool call ids of 9 letters and digits");
            out += "[TOOL_RESULTS]{\"content\": " + m.content + ", \"call_id\": \"" + m.tool_call_id + "\"}[/TOOL_RESULTS]";
        } else if (m.role == "system" && system_turns) {
            out += "[SYSTEM_PROMPT]" + m.content + "[/SYSTEM_PROMPT]";
        } else {
            throw UsageError("Mistral's template takes one system message, first, then user and assistant turns");
        }
    }
    return out;
}

std::string llama31_date(const ChatDialect& dialect) {
    return dialect.llama3 == ChatDialect::Llama3::DatedToday ? local_date("%d %b %Y") : "26 Jul 2024";
}

bool uses_tools(const std::vector<ChatMessage>& messages, std::string_view tools_json) {
    if (!tools_json.empty() && tools_json != "[]") return true;
    for (const ChatMessage& m : messages)
        if (m.role == "tool" || !m.tool_calls.empty()) return true;
    return false;
}

std::string render_with_tools(const ChatTemplate& chat_template, const std::vector<ChatMessage>& messages, std::string_view tools_json,
                              bool add_generation_prompt) {
    const ChatDialect& dialect = chat_template.dialect();
    switch (chat_template.family()) {
        case ChatFamily::ChatML:
            return render_hermes(chat_template.default_system(), messages, parse_tools(tools_json), add_generation_prompt);
        case ChatFamily::Qwen3: return render_qwen3(messages, tools_json, add_generation_prompt);
        case ChatFamily::Llama3: return render_llama31(messages, tools_json, add_generation_prompt, llama31_date(dialect));
        case ChatFamily::Llama2:
            if (dialect.inst == ChatDialect::Inst::MistralV7)
                throw UsageError("Mistral Small 3's tool format ([TOOL_CALLS]name[ARGS]...) is not one Strata writes or reads yet",
                                 "send the conversation without tools");
            return render_mistral(messages, tools_json, dialect.inst);
        default: break;
    }
    tool_call_syntax(chat_template.family());  // throws
    return {};
}

ToolCallSyntax tool_call_syntax(ChatFamily family) {
    ToolCallSyntax s;
    switch (family) {
        case ChatFamily::ChatML:
        case ChatFamily::Qwen3:
            s.trigger = s.call_open = "<tool_call>";
            s.call_open += "\n";
            s.call_close = "\n</tool_call>";
            s.separator = "\n";
            s.args_key = "arguments";
            return s;
        case ChatFamily::Llama3:
            s.trigger = "{\"name\"";
            s.args_key = "parameters";
            s.parallel = false;
            return s;
        case ChatFamily::Llama2:
            s.trigger = "[TOOL_CALLS]";
            s.open = "[TOOL_CALLS][";
            s.close = "]";
            s.separator = ", ";
            s.args_key = "arguments";
            s.with_id = true;
            return s;
        default:
            throw UsageError(fmt::format("the {} chat template has no format for tool calls", chat_family_name(family)),
                             "serve a model whose template is ChatML (Qwen, Hermes), Llama 3.1 or Mistral, or choose one with --chat-template");
    }
}

namespace {
// The end of the JSON object starting at text[at] ('{'), or npos while it is not closed.
size_t object_end(std::string_view text, size_t at) {
    int depth = 0;
    bool in_string = false;
    for (size_t i = at; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\') ++i;
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            ++depth;
        } else if ((c == '}' || c == ']') && --depth == 0) {
            return i + 1;
        }
    }
    return std::string_view::npos;
}
}  // namespace

namespace {
// The text before position `end`, without the line breaks and spaces that lead to a call.
std::string before_calls(std::string_view text, size_t end) {
    while (end > 0 && (text[end - 1] == '\n' || text[end - 1] == ' ')) --end;
    return std::string(text.substr(0, end));
}
}  // namespace

ParsedReply parse_reply(std::string_view text, const ToolCallSyntax& syntax, bool cut) {
    ParsedReply r;
    const size_t start = text.find(syntax.trigger);
    if (start == std::string_view::npos) {
        const size_t end = cut ? content_end(text, syntax) : text.size();  // a trigger begun at a cut end is dropped
        r.content = end < text.size() ? before_calls(text, end) : std::string(text);
        return r;
    }
    r.calling = true;
    size_t at = start;
    while ((at = text.find('{', at)) != std::string_view::npos) {
        const size_t end = object_end(text, at);
        if (end == std::string_view::npos) break;
        const ordered_json call = ordered_json::parse(text.substr(at, end - at), nullptr, false);
        at = end;
        if (!call.is_object() || !call.contains("name") || !call["name"].is_string() || !call.contains(syntax.args_key)) continue;
        ChatToolCall c;
        c.name = call["name"];
        c.arguments = call[syntax.args_key].dump(-1, ' ', false, ordered_json::error_handler_t::replace);
        if (call.contains("id") && call["id"].is_string()) c.id = call["id"];
        // The same call again (a model looping on it, as small ones do when made to call) ends the reply.
        if (std::any_of(r.calls.begin(), r.calls.end(), [&](const ChatToolCall& e) {
                return e.name == c.name && (syntax.function_once || e.arguments == c.arguments);
            })) {
            r.repeated = true;
            break;
        }
        r.calls.push_back(std::move(c));
    }
    // The trigger but no call that parses: text after all, unless the reply was cut in the call.
    r.content = r.calls.empty() && !cut ? std::string(text) : before_calls(text, start);
    return r;
}

size_t content_end(std::string_view text, const ToolCallSyntax& syntax) {
    const size_t at = text.find(syntax.trigger);
    if (at != std::string_view::npos) return at;
    // The longest end of the text that begins the trigger is held back.
    for (size_t n = std::min(text.size(), syntax.trigger.size() - 1); n > 0; --n)
        if (syntax.trigger.compare(0, n, text.substr(text.size() - n)) == 0) return text.size() - n;
    return text.size();
}

}  // namespace strata::models
