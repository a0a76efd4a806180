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

TEST_CASE("speculation forecast: a tree verifies its most likely nodes, as many as pay", "[unit][planner]") {
    using strata::planner::forecast_draft;
    auto streamed = [](int64_t rows) { return 1.0 + 0.01 * double(rows - 1); };
    // A root's two children at 0.6 and 0.3, each with a child at 0.6 and 0.3 of its own chance.
    const std::vector<double> chances{0.6, 0.36, 0.3, 0.18, 0.18, 0.09};
    const auto wide = forecast_draft(streamed, chances);
    CHECK(wide.depth == 6);
    CHECK(wide.tokens_per_pass == Approx(1 + 0.6 + 0.36 + 0.3 + 0.18 + 0.18 + 0.09));
    // Rows at a tenth of a pass: the nodes below 0.1 * (tokens so far) stop paying.
    const auto narrow = forecast_draft([](int64_t rows) { return 1.0 + 0.1 * double(rows - 1); }, chances);
    CHECK(narrow.depth == 5);
    CHECK(narrow.tokens_per_s == Approx((1 + 0.6 + 0.36 + 0.3 + 0.18 + 0.18) / 1.5));
    // A chain is the tree of one child a node: the same forecast.
    const auto chain = strata::planner::forecast_speculation(streamed, 0.6, 3);
    const std::vector<double> line{0.6, 0.36, 0.216};
    CHECK(forecast_draft(streamed, line).tokens_per_s == Approx(chain.tokens_per_s));
    CHECK(forecast_draft([](int64_t rows) { return double(rows); }, chances).depth == 0);
}
