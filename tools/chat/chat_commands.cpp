#include "tools/chat/chat_commands.h"

#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "core/error.h"
#include "tools/chat/chat_session.h"

namespace strata::cli {

namespace {
constexpr const char* kHelp =
    "/help        this list\n"
    "/reset       forget the conversation (the system prompt stays)\n"
    "/stats       speed of the last reply and overall, prompt tokens cached and new, context used, plan\n"
    "/save FILE   write the conversation to FILE (JSON)\n"
    "/load FILE   continue the conversation saved in FILE\n"
    "/exit, /quit leave (so do Ctrl-D, and Ctrl-C at the prompt twice)\n"
    "A line ending in \\ continues on the next line; a line starting with \"\"\" opens a block that\n"
    "a line ending in \"\"\" closes. Ctrl-C stops a reply.\n";

std::string_view trim(std::string_view s) {
    const auto a = s.find_first_not_of(" \t\n");
    if (a == std::string_view::npos) return {};
    return s.substr(a, s.find_last_not_of(" \t\n") - a + 1);
}

std::string file_argument(std::string_view command, std::string_view arg) {
    if (arg.empty()) throw UsageError(fmt::format("{} needs a file name", command), fmt::format("{} FILE", command));
    return std::string(arg);
}
}  // namespace

bool is_chat_command(std::string_view line) { return !line.empty() && line.front() == '/'; }

bool run_chat_command(ChatSession& session, std::string_view line) {
    line = trim(line);
    const auto space = line.find_first_of(" \t");
    const std::string_view command = line.substr(0, space);
    const std::string_view arg = space == std::string_view::npos ? std::string_view{} : trim(line.substr(space));
    if (command == "/exit" || command == "/quit") return false;
    if (command == "/help") {
        std::fputs(kHelp, stdout);
    } else if (command == "/reset") {
        session.reset();
        std::fputs("(conversation cleared)\n", stdout);
    } else if (command == "/stats") {
        std::fputs(session.stats_report().c_str(), stdout);
    } else if (command == "/save") {
        const std::string path = file_argument(command, arg);
        session.save(path);
        std::fprintf(stdout, "(saved %zu messages to %s)\n", session.n_messages(), path.c_str());
    } else if (command == "/load") {
        const std::string path = file_argument(command, arg);
        session.load(path);
        std::fprintf(stdout, "(loaded %zu messages from %s)\n", session.n_messages(), path.c_str());
    } else {
        throw UsageError(fmt::format("unknown command '{}'", command),
                         "/help lists the commands; start the line with a space to send it as a message");
    }
    std::fflush(stdout);
    return true;
}

}  // namespace strata::cli
