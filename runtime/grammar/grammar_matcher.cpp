#include "runtime/grammar/grammar_matcher.h"

#include <algorithm>

namespace strata::runtime {

namespace {
void add_once(std::vector<const GrammarMatcher::Node*>& out, const GrammarMatcher::Node* n) {
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
}

// The code points a UTF-8 sequence of `length` bytes may hold (shorter forms are overlong).
constexpr uint32_t kMinCodePoint[5] = {0, 0, 0x80, 0x800, 0x10000};
constexpr uint32_t kMaxCodePoint = 0x10FFFF;
}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
    for (uint32_t alt : grammar_->rules[grammar_->root].alternatives) expand(intern(alt, nullptr), state_.stacks);
}

const GrammarMatcher::Node* GrammarMatcher::intern(uint32_t pos, const Node* parent) const {
    const uint64_t key = (uint64_t{pos} << 32) | (parent ? parent->id : 0);
    auto [it, added] = index_.try_emplace(key, nullptr);
    if (added) {
        nodes_.push_back({pos, static_cast<uint32_t>(nodes_.size() + 1), parent});
        it->second = &nodes_.back();
    }
    return it->second;
}

void GrammarMatcher::expand(const Node* top, std::vector<const Node*>& out) const {
    for (;;) {
        if (!top) return add_once(out, nullptr);
        const GrammarSymbol& sym = grammar_->code[top->pos];
        if (sym.kind == GrammarSymbol::Chars) return add_once(out, top);
        if (sym.kind == GrammarSymbol::End) {  // this alternative is done: continue with what called it
            top = top->parent;
            continue;
        }
        // A rule: what follows it (skipped when the rule ends its alternative, so right
        // recursion keeps the stack flat), under each of its alternatives.
        const Node* after = grammar_->code[top->pos + 1].kind == GrammarSymbol::End ? top->parent : intern(top->pos + 1, top->parent);
        for (uint32_t alt : grammar_->rules[sym.index].alternatives) expand(intern(alt, after), out);
        return;
    }
}

bool GrammarMatcher::is_complete(const State& s) {
    return s.pending == 0 && std::find(s.stacks.begin(), s.stacks.end(), nullptr) != s.stacks.end();
}

bool GrammarMatcher::step(const State& from, uint8_t byte, State& next) const {
    uint32_t cp = 0;
    if (from.pending == 0) {
        const int extra = byte < 0x80 ? 0 : (byte >> 5) == 6 ? 1 : (byte >> 4) == 14 ? 2 : (byte >> 3) == 30 ? 3 : -1;
        if (extra < 0) return false;
        cp = extra == 0 ? byte : byte & (0x3fu >> extra);
        next.pending = static_cast<uint8_t>(extra);
        next.length = static_cast<uint8_t>(extra + 1);
    } else {
        if ((byte >> 6) != 2) return false;
        cp = (from.partial << 6) | (byte & 0x3f);
        next.pending = static_cast<uint8_t>(from.pending - 1);
        next.length = from.length;
    }
    if (next.pending > 0) {
        // Still inside a character: keep the stacks while one of them could take it.
        const int shift = 6 * next.pending;
        const uint32_t lo = std::max(cp << shift, kMinCodePoint[next.length]);
        const uint32_t hi = std::min((cp << shift) | ((1u << shift) - 1), kMaxCodePoint);
        if (lo > hi) return false;
        const bool possible = std::any_of(from.stacks.begin(), from.stacks.end(), [&](const Node* s) {
            return s && grammar_->char_sets[grammar_->code[s->pos].index].matches_any(lo, hi);
        });
        if (!possible) return false;
        next.partial = cp;
        next.stacks = from.stacks;
        return true;
    }
    if (cp < kMinCodePoint[next.length] || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    next.partial = 0;
    next.length = 0;
    next.stacks.clear();
    for (const Node* s : from.stacks)
        if (s && grammar_->char_sets[grammar_->code[s->pos].index].matches(cp)) expand(intern(s->pos + 1, s->parent), next.stacks);
    return !next.stacks.empty();
}

bool GrammarMatcher::run(State& s, std::string_view bytes) const {
    State next;
    for (char c : bytes) {
        if (!step(s, static_cast<uint8_t>(c), next)) return false;
        std::swap(s, next);
    }
    return true;
}

bool GrammarMatcher::accept(std::string_view bytes) {
    State s = state_;
    if (!run(s, bytes)) return false;
    state_ = std::move(s);
    return true;
}

bool GrammarMatcher::allows(std::string_view bytes) const {
    State s = state_;
    return run(s, bytes);
}

}  // namespace strata::runtime
