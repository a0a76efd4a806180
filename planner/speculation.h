#pragma once
// Speculative decoding priced: a verifying pass of 1 + n rows (the last token and n draft
// tokens, a chain or a tree) costs what the cost model says a decoding pass of that many rows
// costs, and yields 1 + the expected draft tokens it keeps: the sum over its nodes of the
// chance that the target's tokens run down to that node. In a chain at acceptance rate a that
// is a + a^2 + ... + a^n; in a tree each node's chance is its parent's times the chance that
// the target picks it among its siblings. The best draft is the most likely n nodes for the n
// with the most tokens a second; the runtime chooses each draft so (runtime/spec/speculation.h).
#include <cstdint>
#include <functional>
#include <span>

namespace strata::planner {

struct SpecForecast {
    int32_t depth = 0;            // draft tokens a pass verifies
    double tokens_per_pass = 1;   // expected, for this sequence
    double tokens_per_s = 0;      // of the whole pass (the other sequences' tokens counted)
    double plain_tokens_per_s = 0;  // the same pass without drafts
};

// pass_seconds(rows): a decoding pass of `rows` rows (> 0 for rows >= 1); `others`: rows of
// other sequences in the same pass (one token each); draft_seconds: a drafter's time per guessed
// token (0 for a free one such as prompt lookup). node_chances: each draft node's chance to be
// kept, most likely first (a node never before its parent); the forecast verifies a prefix.
SpecForecast forecast_draft(const std::function<double(int64_t rows)>& pass_seconds, std::span<const double> node_chances,
                            int64_t others = 0, double draft_seconds = 0);
// A chain of up to max_depth tokens at acceptance rate `acceptance`.
SpecForecast forecast_speculation(const std::function<double(int64_t rows)>& pass_seconds, double acceptance,
                                  int32_t max_depth, int64_t others = 0, double draft_seconds = 0);

}  // namespace strata::planner
