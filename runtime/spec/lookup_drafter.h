#pragma once
// Prompt lookup (n-gram) drafting: the tokens that followed the earlier places where the
// sequence's most recent n tokens appeared in it (prompt or output). No model: edits, answers
// from a document and summaries repeat their context, so long runs of the output are copies.
// As a tree, the continuations of many earlier matches merged where they agree: a branch that
// more matches (and longer ones) continue is trusted first, since a short n-gram such as " the"
// matches dozens of places and the latest of them is seldom the one the text copies next.
#include "runtime/spec/drafter.h"

namespace strata::runtime {

class LookupDrafter : public Drafter {
public:
    // Matches the last max_ngram tokens first, down to min_ngram.
    explicit LookupDrafter(int32_t max_ngram = 3, int32_t min_ngram = 1);
    // The tree's most trusted path (one child a node).
    void draft(std::span<const int32_t> context, int32_t max, std::vector<int32_t>& out) override;
    void draft_tree(std::span<const int32_t> context, int32_t depth, int32_t nodes, int32_t width, DraftTree& out) override;

private:
    struct Match {
        int64_t from;    // where the text after the earlier occurrence starts
        int32_t ngram;   // the tokens it shares with the sequence's end
    };
    // Earlier matches of the sequence's last tokens: the longest n-gram's first, each n-gram's
    // latest first, one per continuation; at most `most`.
    std::vector<Match> matches(std::span<const int32_t> context, size_t most) const;

    int32_t max_ngram_, min_ngram_;
};

}  // namespace strata::runtime
