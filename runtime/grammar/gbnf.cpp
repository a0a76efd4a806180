#include "runtime/grammar/gbnf.h"

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

#include "core/error.h"

namespace strata::runtime {

bool CharSet::matches(uint32_t cp) const { return matches_any(cp, cp); }

bool CharSet::matches_any(uint32_t lo, uint32_t hi) const {
    if (!negated) {
        for (const CharRange& r : ranges)
            if (r.lo <= hi && lo <= r.hi) return true;
        return false;
    }
    // Negated: some code point of lo..hi lies outside every range (they are sorted and disjoint).
    uint32_t next = lo;
    for (const CharRange& r : ranges) {
        if (r.hi < next) continue;
        if (r.lo > next) return true;
        if (r.hi >= hi) return false;
        next = r.hi + 1;
    }
    return next <= hi;
}

namespace {

constexpr uint32_t kUnbounded = UINT32_MAX;
using Sequence = std::vector<GrammarSymbol>;
using Alternatives = std::vector<Sequence>;

bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class GbnfParser {
public:
    explicit GbnfParser(std::string_view text) : text_(text) {}

    Grammar parse(std::string_view root_rule) {
        skip_space(true);
        while (pos_ < text_.size()) {
            parse_rule();
            skip_space(true);
        }
        return assemble(root_rule);
    }

private:
    [[noreturn]] void fail(const std::string& what, size_t at) const {
        size_t line = 1, col = 1;
        for (size_t i = 0; i < at && i < text_.size(); ++i) {
            if (text_[i] == '\n') {
                ++line;
                col = 1;
            } else {
                ++col;
            }
        }
        throw UsageError(fmt::format("grammar line {} column {}: {}", line, col, what),
                         "see llama.cpp's grammars/README.md for the GBNF notation");
    }
    [[noreturn]] void fail(const std::string& what) const { fail(what, pos_); }

    char peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }
    bool at_end() const { return pos_ >= text_.size(); }

    // Spaces and comments; line breaks too when `newline_ok` (inside parentheses, after '|').
    void skip_space(bool newline_ok) {
        while (!at_end()) {
            const char c = peek();
            if (c == ' ' || c == '\t') {
                ++pos_;
            } else if (c == '#') {
                while (!at_end() && peek() != '\n') ++pos_;
            } else if (newline_ok && (c == '\n' || c == '\r')) {
                ++pos_;
            } else {
                break;
            }
        }
    }

    std::string parse_name() {
        const size_t start = pos_;
        while (!at_end() && is_name_char(peek())) ++pos_;
        if (pos_ == start) fail(fmt::format("expected a rule name, found '{}'", std::string(1, peek())));
        return std::string(text_.substr(start, pos_ - start));
    }

    uint32_t rule_id(const std::string& name, size_t used_at) {
        auto [it, added] = ids_.try_emplace(name, static_cast<uint32_t>(bodies_.size()));
        if (added) {
            bodies_.emplace_back();
            names_.push_back(name);
            defined_.push_back(false);
            first_use_.push_back(used_at);
        }
        return it->second;
    }

    uint32_t new_rule(const std::string& base, Alternatives body) {
        const std::string name = fmt::format("{}-{}", base, ++n_generated_);
        const uint32_t id = rule_id(name, pos_);
        bodies_[id] = std::move(body);
        defined_[id] = true;
        return id;
    }

    void parse_rule() {
        const size_t start = pos_;
        const std::string name = parse_name();
        skip_space(false);
        if (text_.substr(pos_, 3) != "::=") fail("expected '::=' after the rule name");
        pos_ += 3;
        skip_space(true);
        const uint32_t id = rule_id(name, start);
        if (defined_[id]) fail(fmt::format("rule '{}' is defined twice", name), start);
        current_ = name;
        Alternatives body = parse_alternatives(false);
        bodies_[id] = std::move(body);
        defined_[id] = true;
        skip_space(false);
        if (!at_end() && peek() != '\n' && peek() != '\r') fail(fmt::format("unexpected '{}'", std::string(1, peek())));
    }

    Alternatives parse_alternatives(bool nested) {
        Alternatives alts;
        alts.push_back(parse_sequence(nested));
        while (peek() == '|') {
            ++pos_;
            skip_space(true);
            alts.push_back(parse_sequence(nested));
        }
        return alts;
    }

    Sequence parse_sequence(bool nested) {
        Sequence seq;
        for (;;) {
            const char c = peek();
            if (at_end() || c == '|' || c == ')' || c == '\n' || c == '\r') break;
            Sequence atom = parse_atom();
            skip_space(nested);
            repeat(atom, seq);
            skip_space(nested);
        }
        return seq;
    }

    Sequence parse_atom() {
        const char c = peek();
        if (c == '"') {
            ++pos_;
            Sequence lit;
            while (peek() != '"') {
                if (at_end()) fail("a string literal is not closed");
                const uint32_t cp = parse_char();
                lit.push_back(chars({{cp, cp}}, false));
            }
            ++pos_;
            return lit;
        }
        if (c == '[') return {parse_class()};
        if (c == '.') {
            ++pos_;
            return {chars({}, true)};
        }
        if (c == '(') {
            const size_t open = pos_++;
            // The parser recurses per group: a bound keeps hostile text from exhausting the stack.
            if (++depth_ > kMaxGroupDepth) fail(fmt::format("groups nest deeper than {} levels", kMaxGroupDepth), open);
            skip_space(true);
            Alternatives body = parse_alternatives(true);
            if (peek() != ')') fail("a '(' is not closed", open);
            ++pos_;
            --depth_;
            return {{GrammarSymbol::Rule, new_rule(current_, std::move(body))}};
        }
        if (is_name_char(c)) {
            const size_t at = pos_;
            return {{GrammarSymbol::Rule, rule_id(parse_name(), at)}};
        }
        fail(fmt::format("unexpected '{}'", std::string(1, c)));
    }

    GrammarSymbol parse_class() {
        const size_t open = pos_++;
        bool negated = false;
        if (peek() == '^') {
            negated = true;
            ++pos_;
        }
        std::vector<CharRange> ranges;
        while (peek() != ']') {
            if (at_end()) fail("a '[' is not closed", open);
            const uint32_t lo = parse_char();
            uint32_t hi = lo;
            if (peek() == '-' && peek(1) != ']' && pos_ + 1 < text_.size()) {
                ++pos_;
                hi = parse_char();
                if (hi < lo) fail(fmt::format("the range {:#x}-{:#x} runs backwards", lo, hi));
            }
            ranges.push_back({lo, hi});
        }
        ++pos_;
        return chars(std::move(ranges), negated);
    }

    // One character of a literal or class: an escape or a UTF-8 sequence.
    uint32_t parse_char() {
        const auto byte = static_cast<unsigned char>(peek());
        if (byte == '\\') {
            const char e = peek(1);
            pos_ += 2;
            switch (e) {
                case 'n': return '\n';
                case 'r': return '\r';
                case 't': return '\t';
                case '\\': case '"': case '[': case ']': case '-': case '^': case '/': case '\'': return static_cast<uint32_t>(e);
                case 'x': return parse_hex(2);
                case 'u': return parse_hex(4);
                case 'U': return parse_hex(8);
                default: fail(fmt::format("unknown escape '\\{}'", std::string(1, e)), pos_ - 2);
            }
        }
        int extra = byte < 0x80 ? 0 : (byte >> 5) == 6 ? 1 : (byte >> 4) == 14 ? 2 : (byte >> 3) == 30 ? 3 : -1;
        if (extra < 0 || pos_ + extra >= text_.size() + (extra > 0 ? 0 : 1)) fail("the grammar is not valid UTF-8");
        uint32_t cp = extra == 0 ? byte : byte & (0x3f >> extra);
        ++pos_;
        for (int i = 0; i < extra; ++i, ++pos_) {
            const auto b = static_cast<unsigned char>(peek());
            if ((b >> 6) != 2) fail("the grammar is not valid UTF-8");
            cp = (cp << 6) | (b & 0x3f);
        }
        return cp;
    }

    uint32_t parse_hex(int digits) {
        uint32_t v = 0;
        for (int i = 0; i < digits; ++i, ++pos_) {
            const char c = peek();
            const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
            if (d < 0) fail(fmt::format("expected {} hex digits", digits));
            v = v * 16 + static_cast<uint32_t>(d);
        }
        return v;
    }

    std::optional<uint32_t> parse_count() {
        const size_t start = pos_;
        uint64_t v = 0;
        while (peek() >= '0' && peek() <= '9') {
            v = v * 10 + static_cast<uint64_t>(peek() - '0');
            if (v > kMaxGrammarRepetition) fail(fmt::format("a repetition count above {} is not supported", kMaxGrammarRepetition), start);
            ++pos_;
        }
        if (pos_ == start) return std::nullopt;
        return static_cast<uint32_t>(v);
    }

    // Applies a postfix repetition (if any) to `atom` and appends the result to `out`.
    void repeat(const Sequence& atom, Sequence& out) {
        uint32_t min = 1, max = 1;
        const char c = peek();
        if (c == '*' || c == '+' || c == '?') {
            ++pos_;
            min = c == '+' ? 1 : 0;
            max = c == '?' ? 1 : kUnbounded;
        } else if (c == '{') {
            const size_t open = pos_++;
            skip_space(false);
            min = parse_count().value_or(0);
            skip_space(false);
            max = min;
            if (peek() == ',') {
                ++pos_;
                skip_space(false);
                max = parse_count().value_or(kUnbounded);
                skip_space(false);
            }
            if (peek() != '}') fail("a '{' is not closed", open);
            ++pos_;
            if (max < min) fail(fmt::format("the repetition {{{},{}}} has its bounds reversed", min, max), open);
        }
        for (uint32_t i = 0; i < min; ++i) out.insert(out.end(), atom.begin(), atom.end());
        if (max == kUnbounded) {
            // r ::= atom r |
            const uint32_t r = rule_id(fmt::format("{}-{}", current_, ++n_generated_), pos_);
            Sequence loop = atom;
            loop.push_back({GrammarSymbol::Rule, r});
            bodies_[r] = {loop, {}};
            defined_[r] = true;
            out.push_back({GrammarSymbol::Rule, r});
        } else if (max > min) {
            // (atom (atom ...)?)? nested max - min deep.
            std::optional<uint32_t> inner;
            for (uint32_t i = min; i < max; ++i) {
                Sequence more = atom;
                if (inner) more.push_back({GrammarSymbol::Rule, *inner});
                inner = new_rule(current_, {more, {}});
            }
            out.push_back({GrammarSymbol::Rule, *inner});
        }
    }

    GrammarSymbol chars(std::vector<CharRange> ranges, bool negated) {
        std::sort(ranges.begin(), ranges.end(), [](const CharRange& a, const CharRange& b) { return a.lo < b.lo; });
        std::vector<CharRange> merged;
        for (const CharRange& r : ranges) {
            if (!merged.empty() && r.lo <= merged.back().hi + 1)
                merged.back().hi = std::max(merged.back().hi, r.hi);
            else
                merged.push_back(r);
        }
        std::string key(1, negated ? '^' : '+');
        for (const CharRange& r : merged) key += fmt::format("{:x}-{:x},", r.lo, r.hi);
        auto [it, added] = set_ids_.try_emplace(key, static_cast<uint32_t>(sets_.size()));
        if (added) sets_.push_back(CharSet{std::move(merged), negated});
        return {GrammarSymbol::Chars, it->second};
    }

    Grammar assemble(std::string_view root_rule) {
        for (size_t id = 0; id < bodies_.size(); ++id)
            if (!defined_[id]) fail(fmt::format("rule '{}' is used but not defined", names_[id]), first_use_[id]);
        auto root = ids_.find(std::string(root_rule));
        if (root == ids_.end()) throw UsageError(fmt::format("the grammar has no rule '{}' to start from", root_rule),
                                                 fmt::format("define it: {} ::= ...", root_rule));
        check_left_recursion();
        Grammar g;
        g.root = root->second;
        g.char_sets = std::move(sets_);
        for (size_t id = 0; id < bodies_.size(); ++id) {
            Grammar::Rule rule{names_[id], {}};
            for (const Sequence& alt : bodies_[id]) {
                rule.alternatives.push_back(static_cast<uint32_t>(g.code.size()));
                g.code.insert(g.code.end(), alt.begin(), alt.end());
                g.code.push_back({GrammarSymbol::End, 0});
            }
            g.rules.push_back(std::move(rule));
        }
        return g;
    }

    // A rule that can reach itself before any character would expand for ever.
    void check_left_recursion() const {
        const size_t n = bodies_.size();
        std::vector<bool> nullable(n, false);
        for (bool changed = true; changed;) {
            changed = false;
            for (size_t id = 0; id < n; ++id) {
                if (nullable[id]) continue;
                for (const Sequence& alt : bodies_[id]) {
                    const bool all = std::all_of(alt.begin(), alt.end(), [&](const GrammarSymbol& s) {
                        return s.kind == GrammarSymbol::Rule && nullable[s.index];
                    });
                    if (all) {
                        nullable[id] = changed = true;
                        break;
                    }
                }
            }
        }
        // Depth first from every rule along the rules each alternative can start with, on a
        // stack of its own: a chain of many rules must not exhaust the thread's.
        std::vector<int> state(n, 0);  // 0 unvisited, 1 on the path, 2 done
        struct Frame {
            size_t id, alt = 0, sym = 0;  // the next symbol to look at
        };
        std::vector<Frame> path;
        for (size_t start = 0; start < n; ++start) {
            if (state[start] != 0) continue;
            state[start] = 1;
            path.push_back({start});
            while (!path.empty()) {
                Frame& f = path.back();
                if (f.alt == bodies_[f.id].size()) {
                    state[f.id] = 2;
                    path.pop_back();
                    continue;
                }
                const Sequence& alt = bodies_[f.id][f.alt];
                if (f.sym == alt.size() || alt[f.sym].kind != GrammarSymbol::Rule) {
                    ++f.alt, f.sym = 0;
                    continue;
                }
                const uint32_t next = alt[f.sym].index;
                if (state[next] == 1)
                    throw UsageError(fmt::format("the grammar is left-recursive: rule '{}' can reach itself before "
                                                 "reading a character", names_[next]),
                                     "rewrite it with repetition (x ::= y ( \",\" y )*) or right recursion");
                // Past a rule that may match nothing, the alternative's next symbol can start it too.
                if (nullable[next]) ++f.sym;
                else ++f.alt, f.sym = 0;
                if (state[next] == 0) {
                    state[next] = 1;
                    path.push_back({next});  // `f` is not used past here
                }
            }
        }
    }

    static constexpr int kMaxGroupDepth = 64;
    std::string_view text_;
    size_t pos_ = 0;
    int depth_ = 0;  // groups open at pos_
    std::string current_;  // the rule being parsed, for the names of the rules it generates
    int n_generated_ = 0;
    std::vector<Alternatives> bodies_;
    std::vector<std::string> names_;
    std::vector<bool> defined_;
    std::vector<size_t> first_use_;
    std::unordered_map<std::string, uint32_t> ids_;
    std::vector<CharSet> sets_;
    std::map<std::string, uint32_t> set_ids_;
};

}  // namespace

Grammar parse_gbnf(std::string_view text, std::string_view root_rule) { return GbnfParser(text).parse(root_rule); }

}  // namespace strata::runtime
