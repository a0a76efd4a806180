// The spill file's background writes land as if written synchronously, in order, whatever the
// caller does with its buffer afterwards, and whether the staging area holds them or not.
#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "runtime/kv/scratch_file.h"
#include "runtime/kv/staged_writer.h"
#include "storage/budget.h"
#include "storage/file_io.h"
#include "tests/support/gguf_writer.h"

using namespace strata;
using namespace strata::runtime;

namespace {
constexpr uint64_t kAlign = storage::kDefaultDioAlign;
constexpr uint64_t kFileBytes = 64 * kAlign;

// Random writes of 1 to 12 aligned units (a staging of 8 wraps, fills and is exceeded), each
// caller buffer scribbled over as soon as write() returns; the file must equal a mirror of them.
void check_writes(uint64_t capacity, uint64_t budget_bytes) {
    ScratchFile file(test::temp_path("staged_writer"), "test file", "--test", kFileBytes);
    storage::MemoryBudget budget("DRAM", budget_bytes);
    std::vector<std::byte> mirror(kFileBytes, std::byte{0});
    std::mt19937 rng(7);
    uint64_t last = 0;
    {
        StagedWriter w(file, budget, capacity, kAlign);
        CHECK(w.staging_bytes() == (capacity <= budget_bytes ? capacity : 0));
        CHECK(budget.used() == w.staging_bytes());
        storage::AlignedBuffer src = storage::allocate_aligned(12 * kAlign);
        for (int i = 0; i < 200; ++i) {
            const uint64_t units = 1 + rng() % 12, at = (rng() % (64 - units + 1)) * kAlign, len = units * kAlign;
            for (uint64_t b = 0; b < len; ++b) src[b] = std::byte(rng());
            std::copy_n(src.get(), len, mirror.begin() + at);
            last = w.write(at, {src.get(), len});
            std::fill_n(src.get(), len, std::byte{0xEE});  // the caller's buffer is free at once
        }
        w.wait(last);
        std::vector<std::byte> got(kFileBytes);
        storage::read_exact(file.file(), 0, got);
        CHECK(got == mirror);
    }
    CHECK(budget.used() == 0);
}
}  // namespace

TEST_CASE("staged writes land in order as if written at once", "[unit][kv]") {
    SECTION("a staging area smaller than some writes") { check_writes(8 * kAlign, UINT64_MAX); }
    SECTION("a budget without room for the staging: every write synchronous") { check_writes(8 * kAlign, 4 * kAlign); }
}
