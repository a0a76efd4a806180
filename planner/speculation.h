#pragma once
// Speculative decoding priced: a verifying pass of 1 + k rows (the last token and k drafts)
// costs what the cost model says a decoding pass of that many rows costs, and yields the
// expected tokens it keeps: 1 + a + a^2 + ... + a^k at acceptance rate a (each draft token kept
// with probability a while the ones before it were). The best depth is the one with the most
// tokens a second; the runtime chooses each draft's depth so (runtime/spec/speculation.h).
#include <cstdint>
#include <functional>

namespace strata::planner {

struct SpecForecast {
    int32_t depth = 0;            // draft tokens a pass verifies
    double tokens_per_pass = 1;   // expected, for this sequence
    double tokens_per_s = 0;      // of the whole pass (the other sequences' tokens counted)
    double plain_tokens_per_s = 0;  // the same pass without drafts
};

// pass_seconds(rows): a decoding pass of `rows` rows (> 0 for rows >= 1); `others`: rows of
// other sequences in the same pass (one token each); draft_seconds: a drafter's time per guessed
// token (0 for a free one such as prompt lookup); depths up to max_depth.
SpecForecast forecast_speculation(const std::function<double(int64_t rows)>& pass_seconds, double acceptance,
                                  int32_t max_depth, int64_t others = 0, double draft_seconds = 0);

}  // namespace strata::planner
