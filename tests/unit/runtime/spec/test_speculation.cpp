// The draft depth: as deep as pays at the measured price of a pass of each row count and the
// acceptance seen so far; none where rows cost as much as passes, or before anything is measured.
#include <catch2/catch.hpp>

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
            spec.verified(12, 5);  // all kept
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
            spec.verified(0, 5);  // the target drew 5, never the guessed 7
        }
        CHECK(spec.acceptance() < 0.2);
        CHECK(spec.draft(ctx, 0, 16).empty());
    }
}

TEST_CASE("speculation: --spec names a drafter", "[unit][spec]") {
    CHECK(parse_spec_mode("lookup") == SpecMode::Lookup);
    CHECK(parse_spec_mode("off") == SpecMode::Off);
    CHECK(spec_mode_name(parse_spec_mode("auto")) == "auto");
    CHECK_THROWS_AS(parse_spec_mode("ngram"), strata::UsageError);
}
