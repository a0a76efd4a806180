#include "tools/chat/chat_file.h"


#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_write.h"
#include "tools/cli_options.h"

namespace strata::cli {

namespace {
constexpr const char* kFormatHint =
    R"(a conversation file is {"template": NAME, "system": TEXT, "messages": [{"role": "user"|"assistant", "content": TEXT}, ...]}, as /save writes it)";

std::string string_field(const nlohmann::json& obj, const char* key, const std::string& where) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return {};
    if (!it->is_string()) throw UsageError(fmt::format("{}: \"{}\" is {}, not a string", where, key, it->type_name()), kFormatHint);
    return it->get<std::string>();
}
}  // namespace

std::vector<models::ChatMessage> with_system(const std::string& system, const std::vector<models::ChatMessage>& messages) {
    std::vector<models::ChatMessage> msgs;
    if (!system.empty()) msgs.push_back({"system", system});
    msgs.insert(msgs.end(), messages.begin(), messages.end());
    return msgs;
}

void save_chat(const std::filesystem::path& path, const SavedChat& chat) {
    nlohmann::json messages = nlohmann::json::array();
    for (const auto& m : chat.messages) messages.push_back({{"role", m.role}, {"content", m.content}});
    const nlohmann::json j = {{"template", chat.template_name}, {"system", chat.system}, {"messages", messages}};
    // Replaced whole: a full disk keeps the earlier save as it was.
    write_file_whole(path, j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", "the chat",
                     "check that the folder exists and is writable, and the disk has room");
}

SavedChat parse_chat(std::string_view json_text, const std::string& source) {
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(json_text);
    } catch (const nlohmann::json::parse_error& e) {
        throw UsageError(fmt::format("{} is not valid JSON: {}", source, e.what()), kFormatHint);
    }
    if (!j.is_object()) throw UsageError(fmt::format("{} holds {}, not a conversation object", source, j.type_name()), kFormatHint);
    SavedChat chat;
    chat.template_name = string_field(j, "template", source);
    chat.system = string_field(j, "system", source);
    auto msgs = j.find("messages");
    if (msgs == j.end() || !msgs->is_array())
        throw UsageError(fmt::format("{} has no \"messages\" array", source), kFormatHint);
    for (size_t i = 0; i < msgs->size(); ++i) {
        const auto& m = (*msgs)[i];
        const std::string where = fmt::format("{}: message {}", source, i + 1);
        if (!m.is_object()) throw UsageError(fmt::format("{} is {}, not an object", where, m.type_name()), kFormatHint);
        models::ChatMessage msg{string_field(m, "role", where), string_field(m, "content", where)};
        if (msg.role != "user" && msg.role != "assistant")
            throw UsageError(fmt::format("{} has role '{}'; expected \"user\" or \"assistant\"", where, msg.role),
                             "the system prompt goes in the \"system\" field");
        if (!m.contains("content")) throw UsageError(fmt::format("{} has no \"content\"", where), kFormatHint);
        chat.messages.push_back(std::move(msg));
    }
    return chat;
}

SavedChat load_chat(const std::filesystem::path& path) {
    const std::string text = read_file(path.string(), "the chat", "give the path of a file written by /save");
    return parse_chat(text, "'" + path.string() + "'");
}

}  // namespace strata::cli
