// storage/budget: thread-safe budget accounting.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "core/error.h"
#include "storage/budget.h"

using namespace strata;
using namespace strata::storage;

TEST_CASE("a budget refuses what does not fit and names who asked", "[unit][storage]") {
    MemoryBudget b("DRAM", uint64_t{512} << 20, "--dram");
    CHECK(b.try_reserve(uint64_t{100} << 20));
    CHECK_FALSE(b.try_reserve(uint64_t{500} << 20));
    CHECK(b.used() == (uint64_t{100} << 20));
    try {
        b.reserve(uint64_t{600} << 20, "KV cache");
        FAIL("reserved over budget");
    } catch (const OutOfBudget& e) {
        CHECK(std::string(e.what()) == "DRAM budget 512 MiB: 600 MiB requested by KV cache, 412 MiB free (100 MiB in use)");
        CHECK(e.hint().find("--dram") != std::string::npos);
    }
    b.release(uint64_t{100} << 20);
    CHECK(b.used() == 0);
    CHECK(b.peak() == (uint64_t{100} << 20));
    CHECK(b.try_reserve(uint64_t{512} << 20));  // exactly the limit fits
    CHECK_FALSE(b.try_reserve(1));
    b.release(uint64_t{512} << 20);
    CHECK(b.describe() == "DRAM budget 512 MiB, 0 B in use, peak 512 MiB");
    CHECK_FALSE(b.try_reserve(~uint64_t{0}));  // no wrap-around
}

TEST_CASE("reservations release on scope exit and move", "[unit][storage]") {
    MemoryBudget b("GPU", 1000);
    {
        Reservation r(b, 600, "weights");
        CHECK(b.used() == 600);
        Reservation moved = std::move(r);
        CHECK(b.used() == 600);
        CHECK_THROWS_AS(Reservation(b, 500, "scratch"), OutOfBudget);
        CHECK(b.used() == 600);
    }
    CHECK(b.used() == 0);
}

TEST_CASE("concurrent reservations never exceed the budget and balance out", "[unit][storage]") {
    const uint64_t limit = 1000;
    MemoryBudget b("DRAM", limit);
    std::atomic<bool> over{false};
    std::atomic<uint64_t> granted{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; ++t) {
        ts.emplace_back([&, t] {
            for (int i = 0; i < 20000; ++i) {
                const uint64_t n = 1 + (i * 7 + t * 13) % 300;
                if (b.try_reserve(n)) {
                    granted.fetch_add(1);
                    if (b.used() > limit) over = true;
                    b.release(n);
                }
            }
        });
    }
    for (auto& t : ts) t.join();
    CHECK_FALSE(over.load());
    CHECK(b.used() == 0);
    CHECK(b.peak() <= limit);
    CHECK(granted.load() > 0);
}
