#pragma once
// A conversation as `/save FILE` writes it and `/load FILE` (or `--load FILE`) reads it back:
//   {"template": "chatml", "system": "...", "messages": [{"role": "user", "content": "..."}, ...]}
// "system" is the system prompt (empty: none); messages alternate "user" and "assistant".
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "models/chat_template.h"

namespace strata::cli {

struct SavedChat {
    std::string template_name;  // the family it was rendered with; informative on load
    std::string system;
    std::vector<models::ChatMessage> messages;
};

// What a template renders: the system prompt (when there is one), then the turns.
std::vector<models::ChatMessage> with_system(const std::string& system, const std::vector<models::ChatMessage>& messages);

// Throws IoError when the file cannot be written.
void save_chat(const std::filesystem::path& path, const SavedChat& chat);
// Throws IoError when the file cannot be read, UsageError naming the problem when it is not
// a conversation.
SavedChat load_chat(const std::filesystem::path& path);
// `source` names the text in errors (the file name).
SavedChat parse_chat(std::string_view json_text, const std::string& source);

}  // namespace strata::cli
