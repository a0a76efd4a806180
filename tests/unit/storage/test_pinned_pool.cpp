// storage/pinned_pool: aligned, distinct, budgeted slots; the HostPinner hook; blocking acquire.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <set>
#include <thread>

#include "core/error.h"
#include "storage/file_io.h"
#include "storage/pinned_pool.h"

using namespace strata;
using namespace strata::storage;

namespace {

struct FakePinner : HostPinner {
    std::string fail_with;
    int registered = 0, unregistered = 0;
    void* base = nullptr;
    size_t bytes = 0;
    std::string_view name() const override { return "fakeHostRegister"; }
    std::string register_memory(void* b, size_t n) override {
        ++registered;
        base = b;
        bytes = n;
        return fail_with;
    }
    void unregister_memory(void* b, size_t n) noexcept override {
        ++unregistered;
        CHECK(b == base);
        CHECK(n == bytes);
    }
};

PinnedPoolOptions options(size_t slot_bytes, size_t n_slots) {
    PinnedPoolOptions o;
    o.slot_bytes = slot_bytes;
    o.n_slots = n_slots;
    o.pinner = nullptr;
    o.what = "test ring";
    return o;
}

}  // namespace

TEST_CASE("pinned slots are aligned, distinct, budgeted and returned", "[unit][storage]") {
    MemoryBudget budget("DRAM", uint64_t{64} << 20);
    {
        PinnedPool pool(budget, options(3 * 1000 * 1000 + 17, 3));
        CHECK(is_aligned(pool.data(), kHugePageBytes));
        CHECK(pool.bytes() % kHugePageBytes == 0);
        CHECK(budget.used() == pool.bytes());
        CHECK(pool.n_slots() == 3);
        CHECK(pool.n_free() == 3);
        // With CAP_IPC_LOCK (root here) mlock succeeds; elsewhere it falls back with a WARN.
        if (!pool.locked()) WARN("mlock failed here: the pool runs pageable");

        std::vector<PinnedSlot> slots;
        std::set<std::byte*> starts;
        for (int i = 0; i < 3; ++i) {
            auto s = pool.try_acquire();
            REQUIRE(s);
            CHECK(is_aligned(s->data(), 4096));
            CHECK(s->size() == 3 * 1000 * 1000 + 17);
            CHECK(pool.contains(s->data(), s->size()));
            starts.insert(s->data());
            slots.push_back(std::move(*s));
        }
        CHECK(starts.size() == 3);
        // No two slots overlap: each is at least slot_bytes from the next.
        std::byte* prev = nullptr;
        for (std::byte* p : starts) {
            if (prev) CHECK(static_cast<size_t>(p - prev) >= pool.slot_bytes());
            prev = p;
        }
        // The memory is usable end to end.
        for (auto& s : slots) std::memset(s.data(), 0x5a, s.size());
        CHECK_FALSE(pool.try_acquire());
        CHECK(pool.n_free() == 0);
        slots.pop_back();
        CHECK(pool.n_free() == 1);
        CHECK(pool.try_acquire());  // the temporary returns it again
        CHECK(pool.n_free() == 1);
        CHECK_FALSE(pool.contains(pool.data() + pool.bytes() - 10, 11));
    }
    CHECK(budget.used() == 0);
    CHECK(budget.peak() >= 9 * 1000 * 1000);
}

TEST_CASE("a pinned pool over budget is refused before mapping", "[unit][storage]") {
    MemoryBudget budget("DRAM", uint64_t{8} << 20);
    try {
        PinnedPool pool(budget, options(uint64_t{4} << 20, 3));
        FAIL("created");
    } catch (const OutOfBudget& e) {
        CHECK(std::string(e.what()).find("test ring") != std::string::npos);
    }
    CHECK(budget.used() == 0);
    CHECK_THROWS_AS(PinnedPool(budget, options(0, 3)), UsageError);
}

TEST_CASE("slot alignment is configurable up to huge pages", "[unit][storage]") {
    MemoryBudget budget("DRAM", uint64_t{64} << 20);
    auto o = options(100000, 4);
    o.slot_align = kHugePageBytes;
    PinnedPool pool(budget, o);
    CHECK(pool.slot_stride() == kHugePageBytes);
    for (size_t i = 0; i < pool.n_slots(); ++i) CHECK(is_aligned(pool.slot_data(i), kHugePageBytes));
    o.slot_align = 3000;
    CHECK_THROWS_AS(PinnedPool(budget, o), UsageError);
}

TEST_CASE("the host pinner hook registers and unregisters the pool", "[unit][storage]") {
    MemoryBudget budget("DRAM", uint64_t{64} << 20);
    auto pinner = std::make_shared<FakePinner>();
    {
        auto o = options(1 << 20, 2);
        o.pinner = pinner;
        PinnedPool pool(budget, o);
        CHECK(pool.registered());
        CHECK(pinner->base == pool.data());
        CHECK(pinner->bytes == pool.bytes());
    }
    CHECK(pinner->registered == 1);
    CHECK(pinner->unregistered == 1);

    // A failing registration leaves a working, unregistered pool.
    auto failing = std::make_shared<FakePinner>();
    failing->fail_with = "no CUDA device";
    {
        auto o = options(1 << 20, 2);
        o.pinner = failing;
        PinnedPool pool(budget, o);
        CHECK_FALSE(pool.registered());
        CHECK(pool.try_acquire());
    }
    CHECK(failing->unregistered == 0);

    // The process-wide hook is the default for new pools.
    set_host_pinner(pinner);
    PinnedPoolOptions o;
    CHECK(o.pinner == pinner);
    set_host_pinner(nullptr);
    CHECK(PinnedPoolOptions{}.pinner == nullptr);
}

TEST_CASE("acquire blocks until another thread returns a slot", "[unit][storage]") {
    MemoryBudget budget("DRAM", uint64_t{64} << 20);
    auto o = options(4096, 1);
    o.lock = false;
    o.huge_pages = false;
    PinnedPool pool(budget, o);
    CHECK_FALSE(pool.locked());
    auto held = pool.acquire();
    std::atomic<bool> got{false};
    std::thread t([&] {
        PinnedSlot s = pool.acquire();
        got = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    CHECK_FALSE(got.load());
    held.reset();
    t.join();
    CHECK(got.load());
    CHECK(pool.n_free() == 1);
}
