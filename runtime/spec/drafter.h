#pragma once
// What proposes draft tokens for speculative decoding: a guess at the tokens that follow a
// sequence, which the target model then verifies in one pass (runtime/spec/speculation.h).
// Drafters guess greedily: each proposal is one token with certainty (a point mass), which
// the sampler's rejection step (Sampler::verify) accepts or replaces. A guess may branch where
// the drafter is unsure: a tree whose siblings the target tries in turn.
#include <cstdint>
#include <span>
#include <vector>

namespace strata::runtime {

// Draft tokens, each the child of parent[i] (-1: of the sequence's last token; parent[i] < i).
// Siblings come in the order the drafter trusts them, its best guess first. A chain is the
// tree with parent[i] == i - 1.
struct DraftTree {
    std::vector<int32_t> tokens, parent;

    size_t size() const { return tokens.size(); }
    bool empty() const { return tokens.empty(); }
    void clear() { tokens.clear(), parent.clear(); }
    void add(int32_t token, int32_t parent_node) { tokens.push_back(token), parent.push_back(parent_node); }
    // The chain of `tokens`.
    void assign_chain(std::span<const int32_t> chain);
};

class Drafter {
public:
    virtual ~Drafter() = default;
    // Up to `max` tokens guessed to follow `context` (the prompt and every token generated so
    // far, the last one not yet evaluated) into `out` (cleared first); none when it has no guess.
    virtual void draft(std::span<const int32_t> context, int32_t max, std::vector<int32_t>& out) = 0;
    // A tree of guesses into `out` (cleared first): paths of at most `depth` tokens, at most
    // `nodes` tokens, at most `width` children a node. A chain (draft()) unless the drafter branches.
    virtual void draft_tree(std::span<const int32_t> context, int32_t depth, int32_t nodes, int32_t width, DraftTree& out);
    // The target kept the first `accepted` tokens of the last draft (the sequence's KV and the
    // drafter's own state roll back to them).
    virtual void accepted(int32_t /*accepted*/) {}
    // Whether guessing costs a pass of its own (a draft model): such a drafter guesses only the
    // tokens that will be verified, and its time counts in the price of a draft.
    virtual bool costly() const { return false; }
};

}  // namespace strata::runtime
