#include <catch2/catch.hpp>

#include <random>
#include <regex>

#include "runtime/grammar/gbnf.h"
#include "runtime/grammar/grammar_matcher.h"
#include "tests/support/grammar_text.h"

using namespace strata::runtime;
using strata::test::grammar_accepts;

TEST_CASE("the matcher accepts exactly the strings an equivalent regular expression matches", "[unit][grammar]") {
    // Grammar, the same language as an ECMAScript regex (std::regex is the reference).
    const std::vector<std::pair<std::string, std::string>> cases = {
        {R"(root ::= [a-c]+ "x"?)", "[a-c]+x?"},
        {R"(root ::= ("ab" | "c")* "d")", "(ab|c)*d"},
        {"root ::= item (\",\" item){0,2}\nitem ::= [0-9]{1,2}", "[0-9]{1,2}(,[0-9]{1,2}){0,2}"},
        {R"(root ::= [^ab]* "a")", "[^ab]*a"},
        {R"(root ::= . . "x")", "[\\s\\S][\\s\\S]x"},
        {R"(root ::= ("a" | "") ("b"{2,} | "c"{,1}) ("d"? "a")+)", "(a|)(b{2,}|c{0,1})(d?a)+"},
        {"root ::= x | y\nx ::= \"a\" x | \"b\"\ny ::= \"(\" [0-9]* \")\"", "a*b|\\([0-9]*\\)"},
    };
    const std::string alphabet = "abcdx,019()";
    std::mt19937 rng(7);
    for (const auto& [gbnf, pattern] : cases) {
        const auto g = std::make_shared<const Grammar>(parse_gbnf(gbnf));
        const std::regex re(pattern);
        int n_in = 0;
        for (int trial = 0; trial < 3000; ++trial) {
            std::string s;
            const int len = std::uniform_int_distribution<int>(0, 7)(rng);
            for (int i = 0; i < len; ++i) s += alphabet[std::uniform_int_distribution<size_t>(0, alphabet.size() - 1)(rng)];
            // Strings built from the language's own pieces too, so that many are in it.
            if (trial % 2) s = std::regex_replace(s, std::regex("[x,()019]"), "b");
            const bool want = std::regex_match(s, re);
            INFO(gbnf << "  on  '" << s << "'");
            CHECK(grammar_accepts(g, s) == want);
            n_in += want;
        }
        CHECK(n_in > 10);  // the comparison saw both outcomes
    }
}

TEST_CASE("the matcher recognises nested structures no regular expression can", "[unit][grammar]") {
    const auto g = std::make_shared<const Grammar>(parse_gbnf(R"g(root ::= "(" root ")" root | )g"));
    CHECK(grammar_accepts(g, ""));
    CHECK(grammar_accepts(g, "(()())()"));
    CHECK_FALSE(grammar_accepts(g, "(()"));
    CHECK_FALSE(grammar_accepts(g, "())"));
    GrammarMatcher m(g);
    CHECK(m.accept("(("));
    CHECK_FALSE(m.complete());
    CHECK_FALSE(m.accept(")))"));  // refused whole: the state is unchanged
    CHECK(m.accept("))"));
    CHECK(m.complete());
}

TEST_CASE("the matcher takes UTF-8 a byte at a time and refuses a sequence no set can finish", "[unit][grammar]") {
    const auto g = std::make_shared<const Grammar>(parse_gbnf(R"(root ::= [α-ω]+ "!")"));
    GrammarMatcher m(g);
    CHECK(m.allows("\xce"));        // the first byte of α..ο
    CHECK_FALSE(m.allows("\xc3"));  // the first byte of U+00C0..U+00FF
    CHECK_FALSE(m.allows("\xce\x41"));  // not a continuation byte
    CHECK(m.accept("\xce"));
    CHECK_FALSE(m.complete());  // half a character is never a whole text
    CHECK(m.accept("\xb1\xcf\x89!"));  // the rest of α, then ω and "!"
    CHECK(m.complete());
    CHECK_FALSE(GrammarMatcher(g).allows("\xff"));
}
