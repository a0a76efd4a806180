// storage/read_plan: requests become aligned chunk reads that cover exactly the wanted bytes.
#include <catch2/catch.hpp>

#include <random>

#include "storage/file_io.h"
#include "storage/read_plan.h"

using namespace strata::storage;

TEST_CASE("read plans cover the request exactly, aligned, within the chunk size", "[unit][storage]") {
    std::mt19937_64 rng(3);
    const size_t C = 64 << 10;
    for (size_t A : {512u, 4096u}) {
        const FileGeometry geo{uint64_t{1} << 32, true, A, A};
        for (int i = 0; i < 20000; ++i) {
            const uint64_t off = rng() % (geo.size / 2);
            const size_t len = (i % 5 == 0) ? rng() % (2 * A) : rng() % (10 * C);
            // A destination congruent with the offset half the time, misaligned otherwise.
            const uintptr_t dst = (uintptr_t{1} << 30) + ((i % 2) ? off % A : rng() % A);
            const auto plan = plan_reads(reinterpret_cast<void*>(dst), off, len, geo, C);
            INFO("offset " << off << " length " << len << " dst%A " << dst % A << " align " << A);
            uint64_t next = off;  // the wanted bytes must come in order with no gap or overlap
            for (const PlannedRead& p : plan) {
                REQUIRE(p.file_offset % A == 0);
                REQUIRE(p.length % A == 0);
                REQUIRE(p.length > 0);
                REQUIRE(p.length <= C);
                REQUIRE(p.file_offset + p.skip == next);
                REQUIRE(p.dst_offset == next - off);
                REQUIRE(p.copy_len > 0);
                REQUIRE(p.skip + p.copy_len <= p.length);
                REQUIRE(p.need == p.skip + p.copy_len);
                if (!p.bounce) {
                    REQUIRE(p.skip == 0);
                    REQUIRE(p.copy_len == p.length);
                    REQUIRE((dst + p.dst_offset) % A == 0);
                }
                next += p.copy_len;
            }
            REQUIRE(next == off + len);
        }
    }
}

TEST_CASE("congruent destinations bounce only the partial end blocks", "[unit][storage]") {
    const FileGeometry geo{uint64_t{1} << 30, true, 4096, 4096};
    const uintptr_t base = uintptr_t{1} << 30;
    // Aligned offset, length and buffer: straight reads only.
    auto plan = plan_reads(reinterpret_cast<void*>(base), 8192, 3 << 20, geo, 1 << 20);
    REQUIRE(plan.size() == 3);
    for (const auto& p : plan) CHECK_FALSE(p.bounce);
    // Unaligned ends, buffer placed at the same offset within a block: two bounced blocks.
    plan = plan_reads(reinterpret_cast<void*>(base + 100), 8192 + 100, 3 << 20, geo, 1 << 20);
    int bounced = 0;
    for (const auto& p : plan) bounced += p.bounce;
    CHECK(bounced == 2);
    CHECK(plan.front().length == 4096);
    CHECK(plan.back().length == 4096);
    // Misaligned buffer: everything bounces.
    plan = plan_reads(reinterpret_cast<void*>(base + 1), 8192, 3 << 20, geo, 1 << 20);
    for (const auto& p : plan) CHECK(p.bounce);
}

TEST_CASE("buffered files need no alignment", "[unit][storage]") {
    const FileGeometry geo{1 << 20, false, 1, 1};
    const auto plan = plan_reads(reinterpret_cast<void*>(uintptr_t{12345}), 77, 200000, geo, 65536);
    REQUIRE(plan.size() == 4);
    CHECK(plan[0].file_offset == 77);
    CHECK(plan[3].copy_len == 200000 - 3 * 65536);
    for (const auto& p : plan) CHECK_FALSE(p.bounce);
    CHECK(plan_reads(nullptr, 5, 0, geo, 65536).empty());
}
