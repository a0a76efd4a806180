#pragma once
// Prompt lookup (n-gram) drafting: the tokens that followed the last time the sequence's most
// recent n tokens appeared in it (prompt or output). No model: edits, answers from a document
// and summaries repeat their context, so long runs of the output are copies. As a tree, the
// continuations of several earlier matches, merged where they agree and branching where they
// differ, the latest match first.
#include "runtime/spec/drafter.h"

namespace strata::runtime {

class LookupDrafter : public Drafter {
public:
    // Matches the last max_ngram tokens first, down to min_ngram.
    explicit LookupDrafter(int32_t max_ngram = 3, int32_t min_ngram = 1);
    void draft(std::span<const int32_t> context, int32_t max, std::vector<int32_t>& out) override;
    void draft_tree(std::span<const int32_t> context, int32_t depth, int32_t nodes, int32_t width, DraftTree& out) override;

private:
    // Where the text after an earlier match of the sequence's last tokens starts: the longest
    // n-gram's matches first, each n-gram's latest first; at most `most`.
    std::vector<int64_t> matches(std::span<const int32_t> context, size_t most) const;

    int32_t max_ngram_, min_ngram_;
};

}  // namespace strata::runtime
