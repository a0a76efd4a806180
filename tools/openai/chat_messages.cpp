#include "tools/openai/chat_messages.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tools/openai/api_error.h"

namespace strata::openai {

namespace {

std::string message_content(const Json& content, const std::string& where) {
    if (content.is_string()) return content.get<std::string>();
    if (!content.is_array())
        throw invalid_request(fmt::format("'{}' must be a string or a list of text parts, not {}", where, shown(content)), where);
    // Parts on lines of their own, as vLLM and llama.cpp's server join them for a text template.
    std::string text;
    for (const Json& part : content) {
        if (!part.is_object() || part.value("type", Json()) != "text" || !part.contains("text") || !part["text"].is_string())
            throw invalid_request(fmt::format("'{}' may hold only {{\"type\": \"text\", \"text\": ...}} parts", where), where);
        text += (&part == &content.front() ? "" : "\n") + part["text"].get<std::string>();
    }
    return text;
}

std::vector<models::ChatToolCall> tool_calls(const Json& calls, const std::string& where) {
    if (!calls.is_array()) throw invalid_request(fmt::format("'{}' must be a list of tool calls", where), where);
    std::vector<models::ChatToolCall> out;
    for (size_t i = 0; i < calls.size(); ++i) {
        const Json& c = calls[i];
        const std::string at = fmt::format("{}[{}]", where, i);
        const Json* fn = c.is_object() ? field(c, "function") : nullptr;
        if (!fn || !fn->is_object() || !field(*fn, "name") || !(*fn)["name"].is_string())
            throw invalid_request(fmt::format("'{}' must be {{\"type\": \"function\", \"function\": {{\"name\", \"arguments\"}}}}", at), at);
        models::ChatToolCall call;
        call.name = (*fn)["name"].get<std::string>();
        call.id = string_field(c, "id", "");
        const Json* args = field(*fn, "arguments");
        // OpenAI sends the arguments as JSON in a string; an object is taken as it is.
        call.arguments = !args ? "{}" : args->is_string() ? args->get<std::string>() : dump(*args);
        if (Json::parse(call.arguments, nullptr, false).is_discarded())
            throw invalid_request(fmt::format("'{}.function.arguments' is not JSON", at), at + ".function.arguments");
        out.push_back(std::move(call));
    }
    return out;
}

}  // namespace

std::vector<models::ChatMessage> chat_messages(const Json& body) {
    const Json* v = field(body, "messages");
    if (!v) throw invalid_request("'messages' is required", "messages");
    if (!v->is_array() || v->empty()) throw invalid_request("'messages' must be a non-empty list of messages", "messages");
    std::vector<models::ChatMessage> out;
    for (size_t i = 0; i < v->size(); ++i) {
        const Json& m = (*v)[i];
        const std::string where = fmt::format("messages[{}]", i);
        if (!m.is_object()) throw invalid_request(fmt::format("'{}' must be an object with 'role' and 'content'", where), where);
        const Json* role = field(m, "role");
        if (!role || !role->is_string())
            throw invalid_request(fmt::format("'{}.role' must be a string", where), where + ".role");
        models::ChatMessage msg;
        msg.role = role->get<std::string>();
        if (msg.role == "developer") msg.role = "system";  // OpenAI's newer name for the system role
        if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "tool")
            throw invalid_request(fmt::format("'{}.role' must be system, developer, user, assistant or tool, not {}", where, shown(*role)),
                                  where + ".role");
        if (msg.role == "assistant") {
            if (const Json* calls = field(m, "tool_calls")) msg.tool_calls = tool_calls(*calls, where + ".tool_calls");
            // The reasoning an answer gave apart, sent back: the templates that keep it (Qwen3's) read it.
            msg.reasoning = string_field(m, "reasoning_content", "");
        }
        const Json* content = field(m, "content");
        if (!content && msg.role != "assistant") throw invalid_request(fmt::format("'{}.content' is required", where), where + ".content");
        if (content) msg.content = message_content(*content, where + ".content");
        if (msg.role == "tool") {
            const Json* id = field(m, "tool_call_id");
            if (!id || !id->is_string())
                throw invalid_request(fmt::format("'{}.tool_call_id' must name the call it answers", where), where + ".tool_call_id");
            msg.tool_call_id = id->get<std::string>();
        }
        out.push_back(std::move(msg));
    }
    return out;
}

}  // namespace strata::openai
