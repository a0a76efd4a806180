#include <catch2/catch.hpp>

#include <random>

#include "core/error.h"
#include "runtime/grammar/gbnf.h"
#include "runtime/grammar/grammar_matcher.h"
#include "runtime/grammar/integer_range.h"
#include "tests/support/grammar_text.h"

using namespace strata;
using namespace strata::runtime;
using test::grammar_accepts;

TEST_CASE("integer ranges accept exactly the integers in them, written as JSON writes them", "[unit][grammar]") {
    using R = std::pair<std::optional<int64_t>, std::optional<int64_t>>;
    std::vector<R> ranges = {{0, 0},     {0, 9},      {1, 14},    {7, 7},       {-5, 5},     {-1000, -10}, {19, 1200},
                             {99, 100},  {101, 999},  {-7, std::nullopt},       {std::nullopt, 37}, {500, std::nullopt},
                             {std::nullopt, -42},     {std::nullopt, std::nullopt}};
    std::mt19937 rng(1);
    for (int i = 0; i < 20; ++i) {
        const int64_t a = std::uniform_int_distribution<int64_t>(-1500, 1500)(rng);
        ranges.push_back({a, a + std::uniform_int_distribution<int64_t>(0, 1500)(rng)});
    }
    for (const auto& [lo, hi] : ranges) {
        const std::string gbnf = "root ::= " + integer_range_gbnf(lo, hi);
        INFO(gbnf);
        const auto g = std::make_shared<const Grammar>(parse_gbnf(gbnf));
        for (int64_t n = -1600; n <= 1600; ++n) {
            INFO(n);
            REQUIRE(grammar_accepts(g, std::to_string(n)) == ((!lo || n >= *lo) && (!hi || n <= *hi)));
        }
        // Numbers far outside the window, and what JSON never writes.
        CHECK(grammar_accepts(g, "123456789012") == (!hi || *hi >= 123456789012LL));
        CHECK(grammar_accepts(g, "-123456789012") == (!lo || *lo <= -123456789012LL));
        CHECK_FALSE(grammar_accepts(g, "-0"));
        CHECK_FALSE(grammar_accepts(g, "007"));
        CHECK_FALSE(grammar_accepts(g, ""));
    }
    CHECK_THROWS_AS(integer_range_gbnf(5, 4), UsageError);
}
