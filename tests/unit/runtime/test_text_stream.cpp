#include <catch2/catch.hpp>

#include "runtime/text_stream.h"

using namespace strata;
using namespace strata::runtime;

TEST_CASE("text is emitted only in whole UTF-8 characters", "[unit][text]") {
    TextStream s;
    const std::string euro = "\xE2\x82\xAC";  // U+20AC in three bytes
    CHECK(s.push("a" + euro.substr(0, 1)) == "a");
    CHECK(s.push(euro.substr(1, 1)).empty());
    CHECK(s.push(euro.substr(2) + "b") == euro + "b");
    CHECK(s.text() == "a" + euro + "b");
}

TEST_CASE("stop strings end the text before them, across pieces", "[unit][text]") {
    TextStream s({"<|im_end|>", "\n\n"});
    std::string out;
    for (const char* piece : {"Hello", " world", "<|im", "_e", "nd|>", "ignored"}) out += s.push(piece);
    CHECK(s.stopped());
    CHECK(out == "Hello world");
    CHECK(s.text() == "Hello world");
    CHECK(s.stop_string() == "<|im_end|>");
}

TEST_CASE("of two stop strings in one piece, the one the text reaches first ends it", "[unit][text]") {
    TextStream s({"END", "\n"});
    CHECK(s.push("Hi") == "Hi");
    CHECK(s.push(" there\nand END") == " there");
    CHECK(s.stop_string() == "\n");
    TextStream none({"END"});
    none.push("no stop");
    CHECK(none.stop_string().empty());
}

TEST_CASE("a held-back prefix that does not become a stop string is released", "[unit][text]") {
    TextStream s({"STOP"});
    CHECK(s.push("abc ST") == "abc ");
    CHECK(s.push("ART") == "START");
    CHECK(s.push("x S") == "x ");
    CHECK(s.flush() == "S");
    CHECK_FALSE(s.stopped());
    CHECK(s.text() == "abc STARTx S");
}

TEST_CASE("utf8_complete_prefix finds the last complete character", "[unit][text]") {
    CHECK(utf8_complete_prefix("abc") == 3);
    CHECK(utf8_complete_prefix("ab\xF0\x9F\x98") == 2);      // 3 of 4 bytes of an emoji
    CHECK(utf8_complete_prefix("ab\xF0\x9F\x98\x80") == 6);  // the whole emoji
    CHECK(utf8_complete_prefix("\x80\x80") == 2);            // stray continuation bytes pass
}

TEST_CASE("a character the reply's last token began and none finished is dropped at the end", "[unit][text]") {
    TextStream s;
    CHECK(s.push("star \xF0\x9F\x8C") == "star ");  // 3 of a 4-byte emoji's bytes: held back
    CHECK(s.flush().empty());                        // the reply cut there: not shown as U+FFFD
    CHECK(s.text() == "star ");
}
