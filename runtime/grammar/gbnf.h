#pragma once
// Grammars in GBNF, the notation llama.cpp's `--grammar` reads: `name ::= alternatives`, string
// literals with escapes, character classes (`[a-z]`, `[^"\\]`), `.`, groups, and the repetitions
// `*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}`. Parsed into a flat program the matcher walks: every
// rule is a list of alternatives, each a run of symbols (a character set or a rule) ended by End;
// repetitions and groups become rules of their own, repetition by right recursion.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::runtime {

// Code points lo..hi, inclusive.
struct CharRange {
    uint32_t lo = 0, hi = 0;
};

struct CharSet {
    std::vector<CharRange> ranges;  // sorted, not overlapping
    bool negated = false;           // matches what is not in `ranges`
    bool matches(uint32_t cp) const;
    // Whether some code point in lo..hi matches (a UTF-8 sequence not yet complete).
    bool matches_any(uint32_t lo, uint32_t hi) const;
};

struct GrammarSymbol {
    enum Kind : uint8_t { End, Chars, Rule } kind = End;
    uint32_t index = 0;  // Chars: into char_sets; Rule: into rules
};

struct Grammar {
    struct Rule {
        std::string name;
        std::vector<uint32_t> alternatives;  // where each alternative starts in `code`
    };
    std::vector<Rule> rules;
    std::vector<GrammarSymbol> code;  // every alternative's symbols, each run ended by End
    std::vector<CharSet> char_sets;
    uint32_t root = 0;
};

// Repetition counts above this are refused: each unit of a bound becomes a rule.
inline constexpr uint32_t kMaxGrammarRepetition = 4096;

// Parses GBNF text whose start rule is `root_rule`. Throws UsageError naming the line and
// column for a syntax error, a rule used but not defined, a rule defined twice, a missing start
// rule and left recursion (a rule that can reach itself before reading a character).
Grammar parse_gbnf(std::string_view text, std::string_view root_rule = "root");

}  // namespace strata::runtime
