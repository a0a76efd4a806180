// A ring whose items are not all ready to read (a spilled KV layer whose write-back is still on
// the disk's queue) holds back that item's read and the ones after it, issues them once polled
// ready, and waits for readiness only when the item is acquired; every slot still gets its
// item's bytes.
#include <catch2/catch.hpp>

#include <fstream>
#include <vector>

#include "runtime/weights/stream_ring.h"
#include "storage/budget.h"
#include "storage/file_io.h"
#include "storage/pinned_pool.h"
#include "storage/reader.h"
#include "tests/support/gguf_writer.h"

using namespace strata;
using namespace strata::runtime;

namespace {
constexpr size_t kItemBytes = 4096;
constexpr int kItems = 4;

// Item i's bytes are all i + 1.
std::filesystem::path items_file() {
    const auto path = test::temp_path("stream_ring_items.bin");
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    for (int i = 0; i < kItems; ++i) out.write(std::vector<char>(kItemBytes, char(i + 1)).data(), kItemBytes);
    return path;
}

bool holds(const std::byte* slot, int item) {
    for (size_t b = 0; b < kItemBytes; ++b)
        if (slot[b] != std::byte(item + 1)) return false;
    return true;
}
}  // namespace

TEST_CASE("a ring holds back reads that are not ready and issues them in order", "[unit][stream]") {
    const storage::File file = storage::File::open_read(items_file());
    auto reader = storage::open_reader(file);
    storage::MemoryBudget budget("DRAM", UINT64_MAX);
    storage::PinnedPoolOptions po;
    po.slot_bytes = kItemBytes;
    po.n_slots = 2;
    po.lock = false;
    storage::PinnedPool pool(budget, po);

    std::vector<bool> ready(kItems, true);
    std::vector<int> asked, waited;  // items asked about without and with blocking
    StreamRing ring(
        *reader, pool, {0, 1, 2, 3},
        [](int item) { return std::vector<RingRead>{{0, uint64_t(item) * kItemBytes, kItemBytes}}; }, "test",
        [&](int item, bool block) {
            (block ? waited : asked).push_back(item);
            if (block) ready[item] = true;  // as a wait for the item's write would end
            return bool(ready[item]);
        });

    ready[1] = false;
    CHECK(holds(ring.acquire(0), 0));
    CHECK(asked == std::vector<int>{0, 1});  // item 1 held back, nothing after it asked for
    ready[1] = true;
    ring.poll();
    CHECK(asked == std::vector<int>{0, 1, 1});
    ring.release();  // frees a slot: item 2 is issued
    CHECK(asked.back() == 2);

    ready[3] = false;
    CHECK(holds(ring.acquire(1), 1));
    ring.release();  // item 3 is not ready: held back
    CHECK(holds(ring.acquire(2), 2));
    ring.release();
    CHECK(waited.empty());
    CHECK(holds(ring.acquire(3), 3));  // still not ready: acquire waits for it, then reads it
    CHECK(waited == std::vector<int>{3});
    ring.release();
    CHECK(holds(ring.acquire(0), 0));  // the next cycle
    ring.release();
}
