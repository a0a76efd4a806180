#pragma once
// Prompt lookup (n-gram) drafting: the tokens that followed the last time the sequence's most
// recent n tokens appeared in it (prompt or output). No model: edits, answers from a document
// and summaries repeat their context, so long runs of the output are copies.
#include "runtime/spec/drafter.h"

namespace strata::runtime {

class LookupDrafter : public Drafter {
public:
    // Matches the last max_ngram tokens first, down to min_ngram.
    explicit LookupDrafter(int32_t max_ngram = 3, int32_t min_ngram = 1);
    void draft(std::span<const int32_t> context, int32_t max, std::vector<int32_t>& out) override;

private:
    int32_t max_ngram_, min_ngram_;
};

}  // namespace strata::runtime
