#pragma once
// A reply's text as a terminal should show it: never obeyed as a command.
#include <string>
#include <string_view>

namespace strata::cli {

// `text` with each control byte a model may draw (an escape sequence's ESC, a bell, a backspace,
// DEL) shown as U+FFFD; tabs, line ends and every UTF-8 character pass as they are.
inline std::string terminal_safe(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (const char ch : text) {
        const auto c = static_cast<unsigned char>(ch);
        if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) out += "\xEF\xBF\xBD";
        else out += ch;
    }
    return out;
}

}  // namespace strata::cli
