#pragma once
// Where a text is in a grammar: the pushdown automaton of llama.cpp's llama-grammar. The state is
// a set of stacks, each the symbols still to match, top first; after every character each stack
// is expanded until a character set is on top, so a character is matched against the tops. A
// stack that runs empty means the text may end here. Stacks are linked lists of nodes that are
// interned (one node per position and parent), so advancing allocates little, equal stacks are
// equal pointers, and a state can key a cache. Bytes arrive one at a time: a UTF-8 sequence not
// yet complete is kept while some top could still match a character it may become.
#include <cstdint>
#include <deque>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/grammar/gbnf.h"

namespace strata::runtime {

class GrammarMatcher {
public:
    struct Node {
        uint32_t pos;        // the next symbol to match, an index into Grammar::code
        uint32_t id;         // 1.. in creation order (0 stands for no node)
        const Node* parent;  // what follows once this rule is done; nullptr: the end of the text
    };
    struct State {
        std::vector<const Node*> stacks;  // nullptr: an empty stack (the grammar is complete)
        uint32_t partial = 0;              // bits of a UTF-8 sequence not yet complete
        uint8_t pending = 0;               // its continuation bytes still to come
        uint8_t length = 0;                // its length in bytes
    };

    explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar);

    const State& state() const { return state_; }
    // Feeds bytes; false when the grammar does not allow them (the state is then unchanged).
    bool accept(std::string_view bytes);
    // Whether accept(bytes) would succeed.
    bool allows(std::string_view bytes) const;
    // The text so far is a whole sentence of the grammar.
    bool complete() const { return is_complete(state_); }
    static bool is_complete(const State& s);

    // `next` = `from` after one more byte; false (next unspecified) when it is not allowed.
    // Shared with the token mask's walk, which feeds the bytes of many tokens from one state.
    bool step(const State& from, uint8_t byte, State& next) const;

private:
    const Node* intern(uint32_t pos, const Node* parent) const;
    // Feeds `bytes` to `s` in place; false at the first byte not allowed.
    bool run(State& s, std::string_view bytes) const;
    // Adds to `out` the stacks `top` expands to, each with a character set on top.
    void expand(const Node* top, std::vector<const Node*>& out) const;

    std::shared_ptr<const Grammar> grammar_;
    State state_;
    // The interned nodes; mutable because checking a text creates the nodes it reaches.
    mutable std::deque<Node> nodes_;
    mutable std::unordered_map<uint64_t, const Node*> index_;
};

}  // namespace strata::runtime
