#pragma once
// Text from a model or a model file as a terminal should show it: never obeyed as a command.
#include <string>
#include <string_view>

namespace strata::cli {

// `text` with each control byte a model may draw (an escape sequence's ESC, a bell, a backspace,
// DEL) shown as U+FFFD; tabs and line ends (unless `one_line`) and every UTF-8 character pass as
// they are. `one_line`: for a table's cell (a file's metadata), where a line end would forge a row.
inline std::string terminal_safe(std::string_view text, bool one_line = false) {
    std::string out;
    out.reserve(text.size());
    for (const char ch : text) {
        const auto c = static_cast<unsigned char>(ch);
        if ((c < 0x20 && ((c != '\n' && c != '\t') || one_line)) || c == 0x7f) out += "\xEF\xBF\xBD";
        else out += ch;
    }
    return out;
}

}  // namespace strata::cli
