#include <catch2/catch.hpp>

#include <random>

#include "runtime/core/error.h"
#include "runtime/residency.h"

using namespace strata;

namespace {
constexpr uint64_t kMiB = 1 << 20;
ResidencyInput input(uint64_t budget) {
    ResidencyInput in;
    in.budget = budget;
    in.fixed_bytes = 100 * kMiB;
    in.other_bytes = 50 * kMiB;
    in.layer_bytes = {40 * kMiB, 40 * kMiB, 40 * kMiB, 40 * kMiB, 40 * kMiB};
    in.prefetch_depth = 2;
    return in;
}
}  // namespace

TEST_CASE("residency: everything resident when the budget allows", "[unit][residency]") {
    for (uint64_t budget : {uint64_t{0}, 350 * kMiB, 1000 * kMiB}) {
        auto r = choose_residency(input(budget));
        CHECK(r.n_streamed() == 0);
        CHECK(r.n_slots == 0);
        CHECK(r.resident_bytes == 300 * kMiB);
        CHECK(r.total_bytes == 350 * kMiB);
    }
}

TEST_CASE("residency: a smaller budget streams layers through a ring of depth + 1", "[unit][residency]") {
    auto r = choose_residency(input(349 * kMiB));
    // 100 fixed + 50 other + 3 x 40 ring = 270 MiB; 79 MiB left holds one resident layer.
    CHECK(r.n_streamed() == 4);
    CHECK(r.n_slots == 3);
    CHECK(r.slot_bytes == 40 * kMiB);
    CHECK(r.total_bytes <= 349 * kMiB);
    CHECK(r.resident[0]);
}

TEST_CASE("residency: a budget below the minimum names the minimum", "[unit][residency]") {
    CHECK_THROWS_AS(choose_residency(input(270 * kMiB - 1)), OutOfBudget);
    try {
        choose_residency(input(269 * kMiB));
    } catch (const OutOfBudget& e) {
        CHECK_THAT(e.hint(), Catch::Contains("--dram 270 MiB"));
    }
    CHECK_NOTHROW(choose_residency(input(270 * kMiB)));
}

TEST_CASE("residency: never more than the budget (random shapes)", "[unit][residency]") {
    std::mt19937 rng(3);
    for (int i = 0; i < 2000; ++i) {
        ResidencyInput in;
        in.fixed_bytes = rng() % (1000 * kMiB);
        in.other_bytes = rng() % (1000 * kMiB);
        in.prefetch_depth = 1 + static_cast<int>(rng() % 4);
        in.layer_bytes.resize(1 + rng() % 40);
        uint64_t sum = in.fixed_bytes + in.other_bytes;
        for (auto& b : in.layer_bytes) sum += (b = 1 + rng() % (500 * kMiB));
        in.budget = 1 + rng() % (sum + 100 * kMiB);
        try {
            auto r = choose_residency(in);
            INFO("case " << i);
            CHECK(r.total_bytes <= in.budget);
            CHECK(r.n_slots <= in.prefetch_depth + 1);
            CHECK((r.n_streamed() == 0) == (r.n_slots == 0));
        } catch (const OutOfBudget&) {
            // Only when even the ring does not fit.
            uint64_t largest = *std::max_element(in.layer_bytes.begin(), in.layer_bytes.end());
            const int slots = std::min<int>(static_cast<int>(in.layer_bytes.size()), in.prefetch_depth + 1);
            CHECK(in.fixed_bytes + in.other_bytes + ring_bytes(largest, slots) > in.budget);
        }
    }
}
