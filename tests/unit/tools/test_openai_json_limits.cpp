// Request bodies from untrusted clients: nesting past the limit, ill-formed UTF-8 and numbers
// beyond a double are 400s before anything walks the value, and the error never echoes the
// offending bytes. The reference for "valid" is nlohmann's own unrestricted parser.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <string>

#include "tools/openai/api_error.h"
#include "tools/openai/request.h"

using namespace strata::openai;
using nlohmann::json;

namespace {

std::string nested_arrays(int levels) { return std::string(levels, '[') + std::string(levels, ']'); }

std::string nested_objects(int levels) {
    std::string s;
    for (int i = 0; i < levels; ++i) s += "{\"a\":";
    s += "1";
    return s + std::string(levels, '}');
}

ApiError error_of(const std::string& text) {
    try {
        (void)parse_json_limited(text, "the body", "invalid_json");
    } catch (const ApiError& e) {
        return e;
    }
    FAIL("parsed: " << text.substr(0, 80));
    return ApiError(0, "", "");
}

}  // namespace

TEST_CASE("openai json: nesting up to the limit parses as nlohmann does, one level more is a 400", "[unit][openai]") {
    for (const std::string& text : {nested_arrays(kMaxJsonDepth), nested_objects(kMaxJsonDepth),
                                    std::string(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}]})")}) {
        CHECK(parse_json_limited(text, "the body", "invalid_json") == Json::parse(text));
    }
    for (const std::string& text : {nested_arrays(kMaxJsonDepth + 1), nested_objects(kMaxJsonDepth + 1)}) {
        const ApiError e = error_of(text);
        CHECK(e.status() == 400);
        CHECK(e.code() == "invalid_json");
        CHECK(std::string(e.what()).find("levels deep") != std::string::npos);
    }
}

TEST_CASE("openai json: half a million levels are refused without recursing", "[unit][openai]") {
    // Serialising such a value overflows the stack; the limit means none is ever built.
    const int deep = 500000;
    CHECK(error_of(nested_arrays(deep)).code() == "invalid_json");
    CHECK(error_of(std::string(R"({"prompt": "hi", "stop": )") + nested_arrays(deep) + "}").code() == "invalid_json");
    CHECK(error_of(std::string(deep, '[')).status() == 400);  // never closed
}

TEST_CASE("openai json: ill-formed UTF-8 and unrepresentable numbers are 400s that do not echo the bytes", "[unit][openai]") {
    const std::string bad[] = {
        "{\"prompt\": \"\xff\"}",          // not UTF-8 at all
        "{\"prompt\": \"caf\xc3\x28\"}",    // a continuation byte missing
        "{\"prompt\": \"\xc0\xaf\"}",       // overlong encoding of '/'
        "{\"prompt\": \"\xed\xa0\x80\"}",   // an encoded surrogate
        "{\"prompt\": \"\\ud800\"}",        // a lone surrogate escape
        "{\"max_tokens\": 1e309}",          // past the largest double
        "{\"max_tokens\": NaN}",
        "{\"prompt\": \"hi\"}\xff",
    };
    for (const std::string& text : bad) {
        INFO(text);
        CHECK_FALSE(json::accept(text));  // the reference agrees it is not JSON
        const ApiError e = error_of(text);
        CHECK(e.status() == 400);
        CHECK(e.code() == "invalid_json");
        const std::string message = e.what();
        CHECK(message.find("the body is not valid JSON") == 0);
        for (unsigned char c : message) CHECK(c < 0x80);  // nothing of the client's bytes
    }
    // A raw NUL ends the input for nlohmann's lexer, which then ignores the rest; RFC 8259
    // allows it nowhere.
    const std::string with_nul("{\"prompt\": \"hi\"}\0{\"x\"", 21);
    CHECK(error_of(with_nul).code() == "invalid_json");
    CHECK(error_of(std::string("{\"prompt\": \"a\0b\"}", 17)).status() == 400);
    // Well-formed but unusual text stays as it was sent.
    const std::string fine = "{\"prompt\": \"a\\u0000b \xf0\x9f\x98\x80 \\ud83d\\ude00\"}";
    CHECK(parse_json_limited(fine, "the body", "invalid_json")["prompt"] == json::parse(fine)["prompt"]);
}
