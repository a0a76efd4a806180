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
