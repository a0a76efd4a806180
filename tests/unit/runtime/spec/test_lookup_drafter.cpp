// Prompt lookup: the continuation of the latest earlier occurrence of the sequence's last
// n-gram, longest n-gram first.
#include <catch2/catch.hpp>

#include "runtime/spec/lookup_drafter.h"

using strata::runtime::LookupDrafter;

TEST_CASE("lookup drafter: the tokens after the latest earlier match of the last n-gram", "[unit][spec]") {
    LookupDrafter d(3, 1);
    std::vector<int32_t> out;
    SECTION("the longest n-gram decides over a later shorter match") {
        //                                 0  1  2  3  4  5  6  7  8  9 10 11
        const std::vector<int32_t> ctx{1, 2, 3, 4, 5, 9, 3, 7, 8, 1, 2, 3};
        d.draft(ctx, 4, out);
        CHECK(out == std::vector<int32_t>{4, 5, 9, 3});  // "1 2 3" at 0, not "3" at 6
    }
    SECTION("the latest of several matches, cut at max and at the context's end") {
        const std::vector<int32_t> ctx{5, 6, 1, 5, 6, 2, 5, 6};
        d.draft(ctx, 8, out);
        CHECK(out == std::vector<int32_t>{2, 5, 6});
        d.draft(ctx, 1, out);
        CHECK(out == std::vector<int32_t>{2});
    }
    SECTION("no match: no draft") {
        const std::vector<int32_t> ctx{1, 2, 3, 4};
        d.draft(ctx, 4, out);
        CHECK(out.empty());
        d.draft(std::vector<int32_t>{7}, 4, out);
        CHECK(out.empty());
    }
}
