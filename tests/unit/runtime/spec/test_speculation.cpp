// The draft's size: as large as pays at the measured price of a pass of each row count and the
// acceptance seen so far by depth; none where rows cost as much as passes, or before anything is
// measured; wide where the drafter's second guesses are kept often enough and rows are nearly
// free; prices as the line through the measured ones.
#include <catch2/catch.hpp>

#include <numeric>

#include "core/error.h"
#include "runtime/spec/speculation.h"

using namespace strata::runtime;

namespace {
// Always guesses `n` copies of token 7.
class FixedDrafter : public Drafter {
public:
    explicit FixedDrafter(int32_t n) : n_(n) {}
    void draft(std::span<const int32_t>, int32_t max, std::vector<int32_t>& out) override { out.assign(size_t(std::min(n_, max)), 7); }

private:
    int32_t n_;
};

// Two chains of `n` tokens from the sequence's last token: 7s, and beside them 8s (when width allows).
class ForkDrafter : public Drafter {
public:
    explicit ForkDrafter(int32_t n) : n_(n) {}
    void draft(std::span<const int32_t>, int32_t, std::vector<int32_t>&) override {}
    void draft_tree(std::span<const int32_t>, int32_t depth, int32_t nodes, int32_t width, DraftTree& out) override {
        out.clear();
        for (const int32_t token : {7, 8}) {
            if (token == 8 && width < 2) break;
            for (int32_t i = 0; i < std::min(n_, depth) && int32_t(out.size()) < nodes; ++i)
                out.add(token, i == 0 ? -1 : static_cast<int32_t>(out.size()) - 1);
        }
    }

private:
    int32_t n_;
};

std::vector<int32_t> first(int32_t n) {
    std::vector<int32_t> path(size_t(n), 0);
    std::iota(path.begin(), path.end(), 0);
    return path;
}
}  // namespace

TEST_CASE("speculation: the depth follows the price of rows and the acceptance", "[unit][spec]") {
    const std::vector<int32_t> ctx{1, 2, 3};
    PassPrices prices;
    Speculation spec(std::make_unique<FixedDrafter>(12), prices, 16);
    SECTION("nothing measured: a plain step") { CHECK(spec.draft(ctx, 0, 16).empty()); }
    SECTION("rows nearly free (streamed weights) and drafts kept: deep drafts") {
        for (int r = 1; r <= 13; ++r) prices.record(r, 1.0 + 0.01 * r);
        for (int i = 0; i < 20; ++i) {
            spec.draft(ctx, 0, 16);
            spec.verified(first(12), 5);  // all kept
        }
        CHECK(spec.acceptance() > 0.9);
        CHECK(spec.draft(ctx, 0, 16).size() == 12);
        CHECK(spec.draft(ctx, 0, 5).size() == 5);  // the caller's limit
    }
    SECTION("each row as dear as a pass (a fast resident model): none, however good the guesses") {
        for (int r = 1; r <= 13; ++r) prices.record(r, 1.0 * r);
        CHECK(spec.draft(ctx, 0, 16).empty());
    }
    SECTION("rows free but every draft missed: the shadow guesses bring the depth down to none") {
        for (int r = 1; r <= 13; ++r) prices.record(r, 1.0 + 0.3 * r);
        CHECK_FALSE(spec.draft(ctx, 0, 16).empty());
        for (int i = 0; i < 40; ++i) {
            spec.draft(ctx, 0, 16);
            spec.verified({}, 5);  // the target drew 5, never the guessed 7
        }
        CHECK(spec.acceptance() < 0.2);
        CHECK(spec.draft(ctx, 0, 16).empty());
    }
}

TEST_CASE("speculation: a drafter wrong at the first token but right once it runs drafts deep", "[unit][spec]") {
    // Prompt lookup on an edit: the copy is either off at its first token or right for long.
    // Chance by depth sees that; one rate for every depth would make the tail look unlikely.
    const std::vector<int32_t> ctx{1, 2, 3};
    PassPrices prices;
    for (int r = 1; r <= 13; ++r) prices.record(r, 1.0 + 0.08 * r);
    Speculation spec(std::make_unique<FixedDrafter>(12), prices, 16);
    for (int i = 0; i < 30; ++i) {
        const auto n = static_cast<int32_t>(spec.draft(ctx, 0, 16).size());
        spec.verified(i % 3 == 0 ? first(n) : std::vector<int32_t>{}, 5);  // all kept, or missed at once
    }
    CHECK(spec.acceptance(0, 0) < 0.5);
    CHECK(spec.acceptance(0, 3) > 0.9);
    CHECK(spec.draft(ctx, 0, 16).size() == 12);
}

TEST_CASE("speculation: a pass's price is the line through the measured ones, the plan scaled to them before", "[unit][spec]") {
    PassPrices prices;
    CHECK(prices.price(4) == 0);  // nothing known
    for (int r = 1; r <= 8; ++r) prices.plan(r, 0.5 + 0.1 * r);
    CHECK(prices.price(4) == Approx(0.9));
    prices.record(1, 1.2);  // the machine is twice as slow as planned: the plan's shape at its level
    CHECK(prices.price(5) == Approx(2.0));
    for (int n = 0; n < 3; ++n)
        for (int r : {1, 3, 4}) prices.record(r, 1.0 + 0.01 * r);
    prices.record(2, 1.9);  // once, on a busy moment: it does not price 2 rows out on its own
    CHECK(prices.price(2) < 1.3);
    CHECK(prices.price(16) == Approx(prices.price(1) + 15 * (prices.price(2) - prices.price(1))));  // a line past the measured
    CHECK(prices.price(16) < 2.0);  // not the plan's
}

TEST_CASE("speculation: a tree's second branch is verified where it is drawn often and rows are nearly free", "[unit][spec]") {
    const std::vector<int32_t> ctx{1, 2, 3};
    PassPrices prices;
    for (int r = 1; r <= 17; ++r) prices.record(r, 1.0 + 0.01 * r);
    auto roots = [](const DraftTree& t) {
        std::vector<int32_t> r;
        for (size_t i = 0; i < t.size(); ++i)
            if (t.parent[i] < 0) r.push_back(t.tokens[i]);
        return r;
    };
    SECTION("the target takes the second branch two times in three: both verified") {
        Speculation spec(std::make_unique<ForkDrafter>(6), prices, 16);
        for (int i = 0; i < 30; ++i) {
            const DraftTree& t = spec.draft(ctx, 0, 16);
            if (i % 3 == 0 || roots(t).size() < 2) {
                spec.verified({}, 9);  // the first branch missed; the second, where drafted, missed too
                continue;
            }
            // The second branch's root, kept, and the rest of it.
            std::vector<int32_t> path;
            for (size_t n = 0; n < t.size(); ++n)
                if (t.tokens[n] == 8) path.push_back(static_cast<int32_t>(n));
            spec.verified(path, 5);
        }
        CHECK(spec.acceptance(1) > 0.5);
        const DraftTree& t = spec.draft(ctx, 0, 16);
        CHECK(roots(t) == std::vector<int32_t>{7, 8});
        CHECK(t.size() > 6);
        for (size_t n = 0; n < t.size(); ++n) CHECK(t.parent[n] < static_cast<int32_t>(n));
    }
    SECTION("chains only: no second branch") {
        Speculation spec(std::make_unique<ForkDrafter>(6), prices, 16, true, 1);
        spec.draft(ctx, 0, 16);
        spec.verified(first(6), 5);
        CHECK(roots(spec.draft(ctx, 0, 16)) == std::vector<int32_t>{7});
    }
    SECTION("rows as dear as passes: nothing verified") {
        PassPrices dear;
        for (int r = 1; r <= 17; ++r) dear.record(r, 1.0 * r);
        Speculation spec(std::make_unique<ForkDrafter>(6), dear, 16);
        CHECK(spec.draft(ctx, 0, 16).empty());
    }
}

TEST_CASE("speculation: --spec names a drafter", "[unit][spec]") {
    CHECK(parse_spec_mode("lookup") == SpecMode::Lookup);
    CHECK(parse_spec_mode("off") == SpecMode::Off);
    CHECK(spec_mode_name(parse_spec_mode("auto")) == "auto");
    CHECK_THROWS_AS(parse_spec_mode("ngram"), strata::UsageError);
}
