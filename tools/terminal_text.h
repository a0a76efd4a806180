#pragma once
// Text from a model or a model file as a terminal should show it: never obeyed as a command.
#include <string>
#include <string_view>

namespace strata::cli {

// `text` with each control character a model may draw shown as U+FFFD: C0 bytes (an escape
// sequence's ESC, a bell, a backspace), DEL, the C1 controls (U+0080-U+009F, which some
// terminals obey as ESC sequences), and bytes that are no UTF-8 character (a lone 0x9B is an
// 8-bit CSI there); tabs and line ends (unless `one_line`) and every other UTF-8 character pass
// as they are. `one_line`: for a table's cell (a file's metadata), where a line end would forge
// a row. Generated text comes in whole characters (runtime/text_stream.h).
inline std::string terminal_safe(std::string_view text, bool one_line = false) {
    constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c < 0x80) {
            const bool control = (c < 0x20 && ((c != '\n' && c != '\t') || one_line)) || c == 0x7f;
            if (control) out += kReplacement;
            else out += static_cast<char>(c);
            ++i;
            continue;
        }
        // A UTF-8 sequence: its length by its first byte, then continuation bytes (10xxxxxx).
        const size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 0;
        bool valid = n > 0 && i + n <= text.size();
        for (size_t k = 1; valid && k < n; ++k) valid = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
        const bool c1 = valid && n == 2 && c == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0;
        if (!valid || c1) {
            out += kReplacement;
            i += valid ? n : 1;
            continue;
        }
        out.append(text.substr(i, n));
        i += n;
    }
    return out;
}

}  // namespace strata::cli
