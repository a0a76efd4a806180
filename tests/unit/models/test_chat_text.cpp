#include <catch2/catch.hpp>

#include <string>

#include "models/chat_text.h"

using strata::models::py_lstrip;
using strata::models::py_rstrip;
using strata::models::py_strip;

TEST_CASE("py_strip strips what Python's str.strip() does: Unicode whitespace, not other characters", "[unit][chat]") {
    // U+00A0, U+3000, U+2009, U+0085 and ASCII whitespace are whitespace to Python; U+200B (zero
    // width space) and U+FEFF are not.
    CHECK(py_strip("\xc2\xa0 hi\t\xe3\x80\x80\n") == "hi");
    CHECK(py_strip("\xe2\x80\x89x y\xc2\x85") == "x y");
    CHECK(py_strip("\xe2\x80\x8bhi\xef\xbb\xbf") == "\xe2\x80\x8bhi\xef\xbb\xbf");
    CHECK(py_lstrip("  a  ") == "a  ");
    CHECK(py_rstrip("  a  ") == "  a");
    CHECK(py_strip(" \xe3\x80\x80 ").empty());
    // Malformed UTF-8 at either end is text, kept whole: a lone continuation byte, a cut sequence.
    CHECK(py_strip(" \x80hi\xe3\x80 ") == "\x80hi\xe3\x80");
    CHECK(py_strip("\xa0") == "\xa0");
    // Overlong forms of a space or a tab are malformed, not whitespace.
    CHECK(py_strip("\xc0\xa0x\xe0\x80\xa0") == "\xc0\xa0x\xe0\x80\xa0");
    CHECK(py_strip("\xc0\x89") == "\xc0\x89");
}
