#pragma once
// What proposes draft tokens for speculative decoding: a guess at the tokens that follow a
// sequence, which the target model then verifies in one pass (runtime/spec/speculation.h).
// Drafters guess greedily: each proposal is one token with certainty (a point mass), which
// the sampler's rejection step (Sampler::verify) accepts or replaces.
#include <cstdint>
#include <span>
#include <vector>

namespace strata::runtime {

class Drafter {
public:
    virtual ~Drafter() = default;
    // Up to `max` tokens guessed to follow `context` (the prompt and every token generated so
    // far, the last one not yet evaluated) into `out` (cleared first); none when it has no guess.
    virtual void draft(std::span<const int32_t> context, int32_t max, std::vector<int32_t>& out) = 0;
    // The target kept the first `accepted` tokens of the last draft (the sequence's KV and the
    // drafter's own state roll back to them).
    virtual void accepted(int32_t /*accepted*/) {}
    // Whether guessing costs a pass of its own (a draft model): such a drafter guesses only the
    // tokens that will be verified, and its time counts in the price of a draft.
    virtual bool costly() const { return false; }
};

}  // namespace strata::runtime
