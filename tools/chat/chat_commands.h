#pragma once
// The slash commands of an interactive chat: /help, /reset, /stats, /save FILE, /load FILE,
// /exit.
#include <string_view>

namespace strata::cli {

class ChatSession;

// Whether `line` is a command (starts with '/').
bool is_chat_command(std::string_view line);
// Runs one command; returns false when it asks to leave. Throws Error for a bad command or
// argument (the session goes on).
bool run_chat_command(ChatSession& session, std::string_view line);

}  // namespace strata::cli
