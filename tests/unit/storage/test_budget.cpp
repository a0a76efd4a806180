// storage/budget: memory size parsing and thread-safe budget accounting.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "core/error.h"
#include "storage/budget.h"

using namespace strata;
using namespace strata::storage;

TEST_CASE("memory sizes parse with binary suffixes, bytes and percentages", "[unit][storage]") {
    const uint64_t ram = uint64_t{16} << 30;
    CHECK(parse_memory_size("4096", ram) == 4096);
    CHECK(parse_memory_size("0", ram) == 0);
    CHECK(parse_memory_size("512M", ram) == (uint64_t{512} << 20));
    CHECK(parse_memory_size("6G", ram) == (uint64_t{6} << 30));
    CHECK(parse_memory_size("1.5G", ram) == (uint64_t{3} << 29));
    CHECK(parse_memory_size("64k", ram) == 65536);
    CHECK(parse_memory_size("2T", ram) == (uint64_t{2} << 40));
    CHECK(parse_memory_size("512MiB", ram) == (uint64_t{512} << 20));
    CHECK(parse_memory_size("512mb", ram) == (uint64_t{512} << 20));
    CHECK(parse_memory_size("100B", ram) == 100);
    CHECK(parse_memory_size(" 8G ", ram) == (uint64_t{8} << 30));
    CHECK(parse_memory_size("40%", ram) == static_cast<uint64_t>(ram * 0.4));
    CHECK(parse_memory_size("100%", ram) == ram);
    CHECK(parse_memory_size("12.5%", ram) == ram / 8);
}

TEST_CASE("junk memory sizes are usage errors that quote the text", "[unit][storage]") {
    const uint64_t ram = uint64_t{16} << 30;
    for (const char* bad : {"", "  ", "abc", "G", "12X", "-5G", "1.5", "1.2.3G", "0%", "150%", "-1%", "5 GB extra",
                            "1e9", "99999999999T", "18446744073709551616", ".G", "4096 bytes"}) {
        INFO("input '" << bad << "'");
        try {
            parse_memory_size(bad, ram);
            FAIL("accepted");
        } catch (const UsageError& e) {
            CHECK(std::string(e.what()).find(std::string("'") + bad + "'") != std::string::npos);
            CHECK(!e.hint().empty());
        }
    }
}

TEST_CASE("total RAM comes from sysconf and is plausible", "[unit][storage]") {
    const uint64_t ram = system_ram_bytes();
    CHECK(ram >= (uint64_t{256} << 20));
    CHECK(parse_memory_size("50%") == ram / 2);
}

TEST_CASE("byte counts print in binary units", "[unit][storage]") {
    CHECK(format_bytes(0) == "0 B");
    CHECK(format_bytes(600) == "600 B");
    CHECK(format_bytes(uint64_t{512} << 20) == "512 MiB");
    CHECK(format_bytes(uint64_t{3} << 29) == "1.5 GiB");
    CHECK(format_bytes(1536) == "1.5 KiB");
}

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
