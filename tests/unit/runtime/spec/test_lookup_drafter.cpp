// Prompt lookup: the continuations of the earlier occurrences of the sequence's last n-gram,
// the one that more (and longer) matches continue first, the latest on a tie.
#include <catch2/catch.hpp>

#include "runtime/spec/lookup_drafter.h"

using strata::runtime::LookupDrafter;

TEST_CASE("lookup drafter: the continuation of the longest n-gram's match, the latest of equals", "[unit][spec]") {
    LookupDrafter d(3, 1);
    std::vector<int32_t> out;
    SECTION("the longest n-gram decides over a later shorter match") {
        //                                 0  1  2  3  4  5  6  7  8  9 10 11
        const std::vector<int32_t> ctx{1, 2, 3, 4, 5, 9, 3, 7, 8, 1, 2, 3};
        d.draft(ctx, 4, out);
        CHECK(out == std::vector<int32_t>{4, 5, 9, 3});  // "1 2 3" at 0, not "3" at 6
    }
    SECTION("the latest of equal matches, cut at max and at the context's end") {
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

TEST_CASE("lookup drafter: the continuation most matches agree on before the latest one", "[unit][spec]") {
    LookupDrafter d(3, 1);
    std::vector<int32_t> out;
    SECTION("two matches of \"5 6\" go on with 1 8, the latest with 2 9") {
        //                             0  1  2  3  4  5  6  7  8  9 10 11 12 13
        const std::vector<int32_t> ctx{5, 6, 1, 8, 5, 6, 1, 8, 5, 6, 2, 9, 5, 6};
        d.draft(ctx, 2, out);
        CHECK(out == std::vector<int32_t>{1, 8});
        strata::runtime::DraftTree t;
        d.draft_tree(ctx, 2, 16, 4, t);
        CHECK(t.tokens == std::vector<int32_t>{1, 8, 2, 9});
        CHECK(t.parent == std::vector<int32_t>{-1, 0, -1, 2});
    }
    SECTION("one match of two tokens outweighs three of one") {
        //                             0  1  2  3  4  5  6  7  8  9 10 11 12
        const std::vector<int32_t> ctx{4, 3, 7, 5, 3, 7, 6, 3, 7, 2, 3, 1, 2, 3};
        d.draft(ctx, 1, out);
        CHECK(out == std::vector<int32_t>{1});  // "2 3" at 9, not the three "3 7"s
    }
}

TEST_CASE("lookup drafter: a tree of several matches' continuations, merged where they agree", "[unit][spec]") {
    LookupDrafter d(3, 1);
    strata::runtime::DraftTree t;
    //                                 0  1  2  3  4  5  6  7  8  9 10 11
    const std::vector<int32_t> ctx{5, 6, 1, 2, 5, 6, 3, 4, 5, 6, 1, 7, 5, 6};
    d.draft_tree(ctx, 3, 16, 4, t);
    // "5 6" at 8 (then 1 7 5), at 4 (3 4 5) and at 0 (1 2 5): 1 first, 3 beside it; 1's
    // children 7 (latest) and 2.
    CHECK(t.tokens == std::vector<int32_t>{1, 7, 5, 3, 4, 5, 2, 5});
    CHECK(t.parent == std::vector<int32_t>{-1, 0, 1, -1, 3, 4, 0, 6});
    d.draft_tree(ctx, 3, 16, 1, t);  // one child a node: the latest match's chain
    CHECK(t.tokens == std::vector<int32_t>{1, 7, 5});
    CHECK(t.parent == std::vector<int32_t>{-1, 0, 1});
    d.draft_tree(ctx, 3, 4, 4, t);  // at most four nodes
    CHECK(t.size() == 4);
}
