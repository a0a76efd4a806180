// tools/chat/terminal_text: a reply shown on a terminal cannot move its cursor, ring or erase.
#include <catch2/catch.hpp>

#include "tools/terminal_text.h"

using strata::cli::terminal_safe;

TEST_CASE("chat: control bytes a model draws are shown, not obeyed; text passes whole", "[unit][chat]") {
    CHECK(terminal_safe("plain text\twith a tab\n") == "plain text\twith a tab\n");
    CHECK(terminal_safe("caf\xC3\xA9 \xF0\x9F\x98\x80") == "caf\xC3\xA9 \xF0\x9F\x98\x80");  // UTF-8 untouched
    CHECK(terminal_safe("\x1b[2J") == "\xEF\xBF\xBD[2J");                                   // ESC of "clear the screen"
    CHECK(terminal_safe(std::string("a\x07" "b\x08" "c\x7f", 6)) == "a\xEF\xBF\xBD" "b\xEF\xBF\xBD" "c\xEF\xBF\xBD");
    CHECK(terminal_safe("line\r") == "line\xEF\xBF\xBD");  // a carriage return would overwrite what was shown
}

TEST_CASE("chat: C1 controls and bytes that are no UTF-8 character are shown, not obeyed", "[unit][chat]") {
    CHECK(terminal_safe("a\xC2\x9B" "2J") == "a\xEF\xBF\xBD" "2J");      // U+009B, CSI as a character
    CHECK(terminal_safe("a\x9B" "2J") == "a\xEF\xBF\xBD" "2J");           // a lone byte: CSI to an 8-bit terminal
    CHECK(terminal_safe("\x82\x96") == "\xEF\xBF\xBD\xEF\xBF\xBD");          // continuation bytes alone
    CHECK(terminal_safe("x\xE2\x82") == "x\xEF\xBF\xBD\xEF\xBF\xBD");        // a sequence cut short
    CHECK(terminal_safe("\xC2\xA0\xC2\xBF\xE2\x82\xAC") == "\xC2\xA0\xC2\xBF\xE2\x82\xAC");  // U+00A0, U+00BF, the euro sign
}
