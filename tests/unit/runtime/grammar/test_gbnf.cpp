#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/grammar/gbnf.h"

using namespace strata;
using namespace strata::runtime;

namespace {
std::string error_of(std::string_view text) {
    try {
        parse_gbnf(text);
    } catch (const UsageError& e) {
        return e.what();
    }
    return "";
}
}  // namespace

TEST_CASE("GBNF: rules, literals, classes and repetitions parse into a flat program", "[unit][grammar]") {
    const Grammar g = parse_gbnf(R"(# a comment
root ::= greeting ( ", " name )? "!"   # trailing comment
greeting ::= "hi" | "hello"
name ::= [A-Z] [a-z]{1,8}
)");
    CHECK(g.rules[g.root].name == "root");
    CHECK(g.rules[g.root].alternatives.size() == 1);
    // Every alternative ends with End; the ones of `greeting` are two literals.
    for (const auto& r : g.rules)
        for (uint32_t a : r.alternatives) {
            uint32_t i = a;
            while (g.code[i].kind != GrammarSymbol::End) ++i;
            CHECK(i < g.code.size());
        }
    const auto greeting = std::find_if(g.rules.begin(), g.rules.end(), [](const auto& r) { return r.name == "greeting"; });
    REQUIRE(greeting != g.rules.end());
    CHECK(greeting->alternatives.size() == 2);
}

TEST_CASE("GBNF: character sets decode escapes, ranges and negation", "[unit][grammar]") {
    const Grammar g = parse_gbnf(R"(root ::= [^"\\\x00-\x1F] [a-cx-z] "\u00e9\t" [\]\-])");
    const CharSet& any_but = g.char_sets[g.code[g.rules[g.root].alternatives[0]].index];
    CHECK(any_but.negated);
    CHECK(any_but.matches('a'));
    CHECK(any_but.matches(0x4e2d));
    CHECK_FALSE(any_but.matches('"'));
    CHECK_FALSE(any_but.matches('\\'));
    CHECK_FALSE(any_but.matches(0x1f));
    const CharSet& ranges = g.char_sets[g.code[g.rules[g.root].alternatives[0] + 1].index];
    CHECK(ranges.matches('b'));
    CHECK(ranges.matches('y'));
    CHECK_FALSE(ranges.matches('d'));
    CHECK(ranges.matches_any('d', 'x'));
    CHECK_FALSE(ranges.matches_any('d', 'w'));
    const CharSet& e_acute = g.char_sets[g.code[g.rules[g.root].alternatives[0] + 2].index];
    CHECK(e_acute.matches(0xe9));
    const CharSet& bracket = g.char_sets[g.code[g.rules[g.root].alternatives[0] + 4].index];
    CHECK(bracket.matches(']'));
    CHECK(bracket.matches('-'));
    // A negated set matches some code point of a span unless its ranges cover all of it.
    CHECK(any_but.matches_any(0, 0x21));
    CHECK_FALSE(any_but.matches_any(0, 0x1f));
}

TEST_CASE("GBNF: errors name the line, the column and the problem", "[unit][grammar]") {
    CHECK_THAT(error_of("root ::= \"abc"), Catch::Contains("line 1") && Catch::Contains("not closed"));
    CHECK_THAT(error_of("root ::= x\n"), Catch::Contains("'x' is used but not defined"));
    CHECK_THAT(error_of("root ::= \"a\"\nroot ::= \"b\""), Catch::Contains("line 2") && Catch::Contains("defined twice"));
    CHECK_THAT(error_of("start ::= \"a\""), Catch::Contains("no rule 'root'"));
    CHECK_THAT(error_of("root ::= \"a\" ("), Catch::Contains("not closed"));
    CHECK_THAT(error_of("root = \"a\""), Catch::Contains("expected '::='"));
    CHECK_THAT(error_of("root ::= [z-a]"), Catch::Contains("runs backwards"));
    CHECK_THAT(error_of("root ::= \"a\"{3,1}"), Catch::Contains("reversed"));
    CHECK_THAT(error_of("root ::= \"a\"{99999}"), Catch::Contains("above"));
    CHECK_THAT(error_of("root ::= \"\\q\""), Catch::Contains("unknown escape"));
    // Nesting is bounded (the parser recurses per group): deep enough for any grammar written by hand.
    CHECK(error_of("root ::= " + std::string(64, '(') + "\"a\"" + std::string(64, ')')).empty());
    CHECK_THAT(error_of("root ::= " + std::string(100000, '(') + "\"a\""), Catch::Contains("nest deeper than 64"));
    // Left recursion, direct and through a rule that can match nothing.
    CHECK_THAT(error_of("root ::= root \"a\" | \"b\""), Catch::Contains("left-recursive"));
    CHECK_THAT(error_of("root ::= e x\ne ::= \"\" | \"c\"\nx ::= root | \"d\""), Catch::Contains("left-recursive"));
    // Right recursion and recursion after a character are fine.
    CHECK(error_of("root ::= \"a\" root | \"b\"").empty());
    CHECK(error_of("root ::= \"(\" root \")\" | ").empty());
    // A chain of 100000 rules, each starting with the next, is checked without recursing per
    // rule (that exhausted the stack); closed into a loop, it is left-recursive.
    std::string chain = "root ::= r0\n";
    for (int i = 0; i < 100000; ++i) chain += fmt::format("r{} ::= r{}\n", i, i + 1);
    CHECK(error_of(chain + "r100000 ::= \"a\"").empty());
    CHECK_THAT(error_of(chain + "r100000 ::= r0 | \"a\""), Catch::Contains("left-recursive"));
}
