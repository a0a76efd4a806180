#include "tools/chat/line_input.h"

#include <editline/readline.h>

#include <poll.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <clocale>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cwchar>
#include <system_error>
#include <utility>

#include "core/log.h"
#include "tools/chat/interrupt.h"

namespace strata::cli {

namespace {
constexpr std::string_view kBlockQuote = R"(""")";
constexpr int kHistoryLines = 1000;

bool ends_with(std::string_view s, std::string_view end) {
    return s.size() >= end.size() && s.substr(s.size() - end.size()) == end;
}

// Whether more input already waits on the terminal when a line ends: the rest of a pasted text (a
// person does not type a line's end and the next key within a few milliseconds). Polled with
// the line discipline non-canonical, so that a pasted last line without its end counts too.
bool pasted_text_follows() {
    constexpr int kPasteGapMs = 15;
    termios saved{};
    if (tcgetattr(STDIN_FILENO, &saved) != 0) return false;
    termios polled = saved;
    polled.c_lflag &= ~tcflag_t(ICANON);
    polled.c_cc[VMIN] = 0;
    polled.c_cc[VTIME] = 0;
    if (tcsetattr(STDIN_FILENO, TCSANOW, &polled) != 0) return false;
    pollfd p{STDIN_FILENO, POLLIN, 0};
    const bool waiting = ::poll(&p, 1, kPasteGapMs) > 0 && (p.revents & POLLIN);
    tcsetattr(STDIN_FILENO, TCSANOW, &saved);
    return waiting;
}

// The line editor's reads, so that Ctrl-C at the prompt is never lost: it ended the editor's
// own read by interrupting it, so one that came between two reads waited for the next key. A
// key's bytes are decoded (UTF-8, the locale's) into one character, as the editor did: bytes
// that are no character dropped, one that breaks a sequence read again as the next's start.
int read_key(FILE* in) {
    const int fd = in ? fileno(in) : STDIN_FILENO;
    std::mbstate_t state{};
    bool partial = false;
    for (;;) {
        switch (wait_for_input(fd)) {
            case Wait::Interrupted: return -1;  // the editor ends the line; take_interrupt says why
            case Wait::Signalled:  // resized, or continued after a stop: the line editor takes the size
                rl_resize_terminal();
                // Continued after Ctrl-Z: the shell wrote over the line, so it is drawn again.
                if (take_continued()) rl_forced_update_display();
                continue;
            case Wait::Input: break;
        }
        char byte = 0;
        const ssize_t n = ::read(fd, &byte, 1);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) return -1;  // the terminal closed
        for (;;) {
            wchar_t c = 0;
            const size_t used = std::mbrtowc(&c, &byte, 1, &state);
            if (used == static_cast<size_t>(-2)) {
                partial = true;
                break;
            }
            if (used != static_cast<size_t>(-1)) return static_cast<int>(c);
            state = {};
            if (!std::exchange(partial, false)) break;
        }
    }
}
}  // namespace

bool MessageAssembler::feed(std::string_view line) {
    if (!block_ && lines_.empty() && line.substr(0, kBlockQuote.size()) == kBlockQuote) {
        line.remove_prefix(kBlockQuote.size());
        block_ = true;
        if (line.empty()) return false;  // the block's text starts on the next line
    }
    if (block_) {
        if (!ends_with(line, kBlockQuote)) {
            lines_.emplace_back(line);
            return false;
        }
        line.remove_suffix(kBlockQuote.size());
        if (!line.empty()) lines_.emplace_back(line);
        block_ = false;
        return true;
    }
    if (ends_with(line, "\\")) {
        line.remove_suffix(1);
        lines_.emplace_back(line);
        return false;
    }
    lines_.emplace_back(line);
    return true;
}

void MessageAssembler::feed_pasted(std::string_view line) {
    if (block_ || (lines_.empty() && line.substr(0, kBlockQuote.size()) == kBlockQuote)) {
        feed(line);  // a block's own rules; the message goes on with what follows it
        return;
    }
    lines_.emplace_back(line);
}

std::string MessageAssembler::take() {
    std::string out;
    for (size_t i = 0; i < lines_.size(); ++i) out += (i ? "\n" : "") + lines_[i];
    clear();
    return out;
}

void MessageAssembler::clear() {
    lines_.clear();
    block_ = false;
}

LineInput::LineInput(std::filesystem::path history_file) : history_file_(std::move(history_file)) {
    // The line editor reads characters by the C library's locale: in the default "C" one it drops
    // every byte of a non-ASCII character (café arrived as "caf"). The terminal's own, else UTF-8;
    // only the character type, so that numbers keep their format.
    const char* ctype = std::setlocale(LC_CTYPE, "");
    if (!ctype || std::strcmp(ctype, "C") == 0 || std::strcmp(ctype, "POSIX") == 0) std::setlocale(LC_CTYPE, "C.UTF-8");
    rl_readline_name = "strata";  // the application name ~/.editrc rules can match
    rl_getc_function = read_key;  // before using_history, which sets the editor up
    using_history();
    stifle_history(kHistoryLines);
    std::error_code ec;
    std::filesystem::create_directories(history_file_.parent_path(), ec);
    read_history(history_file_.c_str());  // absent on the first run
}

LineInput::Result LineInput::read_message() {
    for (;;) {
        take_interrupt();  // a Ctrl-C from before the prompt was shown (during a command) is spent
        char* raw = [&] {
            const WakeOnTerminalSignals woken;  // the editor keeps these as the process's own
            return readline(assembler_.pending() ? "... " : "> ");
        }();
        if (!raw) {
            assembler_.clear();
            if (take_interrupt()) {
                std::fputc('\n', stdout);
                return {Status::Interrupted, {}};
            }
            return {Status::EndOfInput, {}};
        }
        const std::string line(raw);
        std::free(raw);
        if (!line.empty()) {
            // Lines another chat wrote since are kept: the file is read again and this line added.
            std::error_code exists_ec;
            if (std::filesystem::exists(history_file_, exists_ec)) {
                clear_history();
                read_history(history_file_.c_str());
            }
            add_history(line.c_str());
            // Whole or not at all: written beside it, then renamed over it, so a full disk
            // keeps the history there was rather than leaving it cut short.
            const std::string next = history_file_.string() + ".new";
            std::error_code ec;
            if (write_history(next.c_str()) != 0 || (std::filesystem::rename(next, history_file_, ec), ec)) {
                std::filesystem::remove(next, ec);
                // Once: the messages are not kept for the next session.
                if (!history_warned_)
                    STRATA_LOG_WARN("chat: cannot write the history to {}: this session's lines are not kept",
                                    history_file_.string());
                history_warned_ = true;
            }
        }
        // Several lines pasted at once are one message.
        if (pasted_text_follows()) {
            assembler_.feed_pasted(line);
            continue;
        }
        if (!assembler_.feed(line)) continue;
        std::string msg = assembler_.take();
        if (msg.find_first_not_of(" \t\n") == std::string::npos) continue;  // nothing typed
        return {Status::Message, std::move(msg)};
    }
}

}  // namespace strata::cli
