// Speculation priced: the depth with the most tokens a second, from the price of a pass by
// rows and the acceptance rate, worked out by hand.
#include <catch2/catch.hpp>

#include "planner/speculation.h"

using strata::planner::forecast_speculation;

TEST_CASE("speculation forecast: deep where rows are nearly free, none where each costs a pass", "[unit][planner]") {
    // Streamed weights: 1 s a pass, 0.01 s a row more.
    auto streamed = [](int64_t rows) { return 1.0 + 0.01 * double(rows - 1); };
    const auto deep = forecast_speculation(streamed, 0.9, 16);
    CHECK(deep.depth >= 12);
    // 1 + 0.9 + ... + 0.9^k tokens over 1 + 0.01 k seconds.
    double expected = 1, p = 1;
    for (int k = 1; k <= deep.depth; ++k) expected += (p *= 0.9);
    CHECK(deep.tokens_per_pass == Approx(expected));
    CHECK(deep.tokens_per_s == Approx(expected / (1 + 0.01 * deep.depth)));
    CHECK(deep.plain_tokens_per_s == Approx(1.0));
    // Each row as dear as a pass: any draft loses.
    const auto none = forecast_speculation([](int64_t rows) { return double(rows); }, 0.9, 16);
    CHECK(none.depth == 0);
    CHECK(none.tokens_per_s == Approx(1.0));
    // A drafter's own time per token counts: 0.5 s a guess outweighs what a guess yields at 0.3.
    CHECK(forecast_speculation(streamed, 0.3, 16, 0, 0.5).depth == 0);
    // Other sequences in the pass: their tokens count in both speeds.
    const auto shared = forecast_speculation(streamed, 0.9, 4, 3);
    CHECK(shared.plain_tokens_per_s == Approx(4 / streamed(4)));
    CHECK(shared.depth == 4);
}
