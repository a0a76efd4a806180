#include <catch2/catch.hpp>

#include <numeric>
#include <vector>

#include "core/error.h"
#include "gpu/cuda_kernels.h"
#include "gpu/device_arena.h"
#include "tests/unit/gpu/cuda_test_support.h"

using namespace strata;
using namespace strata::gpu;
using Catch::Matchers::Contains;

TEST_CASE("DeviceArena: aligned, disjoint ranges within the budget", "[unit][gpu_pool]") {
    DeviceArena arena(10000, 256);
    CHECK(arena.capacity() == 9984);  // the tail shorter than the alignment is unusable
    const uint64_t a = arena.allocate(1, "a"), b = arena.allocate(300, "b"), c = arena.allocate(256, "c");
    for (uint64_t off : {a, b, c}) CHECK(off % 256 == 0);
    CHECK(b >= a + 256);
    CHECK(c >= b + 512);
    CHECK(arena.used() == 256 + 512 + 256);
    arena.free(b);
    CHECK(arena.used() == 512);
    arena.free(a);
    arena.free(c);
    CHECK(arena.used() == 0);
    CHECK(arena.allocate(arena.capacity(), "everything") == 0);  // freed ranges merged back into one
}

TEST_CASE("DeviceArena: a request over the budget names the need and the budget", "[unit][gpu_pool]") {
    DeviceArena arena(uint64_t{1} << 20);
    arena.allocate(uint64_t{768} << 10, "weights");
    CHECK_THROWS_AS(arena.allocate(uint64_t{512} << 10, "KV cache"), OutOfBudget);
    CHECK_THROWS_WITH(arena.allocate(uint64_t{512} << 10, "KV cache"),
                      Contains("GPU budget 1 MiB") && Contains("512 KiB requested by KV cache"));
    CHECK(arena.used() == uint64_t{768} << 10);  // a refused request holds nothing
    CHECK_NOTHROW(arena.allocate(uint64_t{256} << 10, "scratch"));
}

TEST_CASE("DeviceArena: memory taken away lowers the limit, what is held stays", "[unit][gpu_pool]") {
    DeviceArena arena(uint64_t{1} << 20);
    const uint64_t held = arena.allocate(uint64_t{512} << 10, "weights");
    arena.set_limit(uint64_t{256} << 10);  // another program took three quarters
    CHECK(arena.limit() == uint64_t{256} << 10);
    CHECK(arena.capacity() == uint64_t{1} << 20);
    CHECK(arena.used() == uint64_t{512} << 10);
    CHECK_THROWS_AS(arena.allocate(1, "scratch"), DeviceOutOfMemory);
    CHECK_THROWS_WITH(arena.allocate(1, "scratch"), Contains("GPU budget 256 KiB"));
    arena.free(held);
    CHECK_NOTHROW(arena.allocate(uint64_t{256} << 10, "scratch"));
    arena.set_limit(uint64_t{4} << 20);  // given back, never past the capacity
    CHECK(arena.limit() == uint64_t{1} << 20);
}

TEST_CASE("DeviceArena: fragmentation is reported, and freeing a neighbour cures it", "[unit][gpu_pool]") {
    DeviceArena arena(4 * 256, 256);
    const uint64_t a = arena.allocate(256, "a"), b = arena.allocate(256, "b"), c = arena.allocate(256, "c");
    arena.allocate(256, "d");
    arena.free(a);
    arena.free(c);
    CHECK(arena.largest_free() == 256);
    CHECK_THROWS_WITH(arena.allocate(512, "KV cache"), Contains("largest free range is 256 B"));
    CHECK(arena.used() == 512);
    arena.free(b);
    CHECK(arena.largest_free() == 768);
    CHECK(arena.allocate(512, "KV cache") == 0);
}

TEST_CASE("DevicePool: budget enforced on the device, buffers aligned and usable", "[gpu]") {
    STRATA_REQUIRE_CUDA_GPU();
    const uint64_t budget = uint64_t{1} << 20;
    DevicePool pool(budget, cuda_malloc_pool(0, budget), cuda_free_pool);
    DeviceBuffer a = pool.allocate(uint64_t{700} << 10, "weights");
    CHECK(reinterpret_cast<uintptr_t>(a.data()) % 256 == 0);
    CHECK_THROWS_WITH(pool.allocate(uint64_t{400} << 10, "KV cache"),
                      Contains("GPU budget 1 MiB") && Contains("400 KiB requested by KV cache"));
    a.reset();  // returned to the pool: now it fits
    DeviceBuffer b = pool.allocate(uint64_t{400} << 10, "KV cache");
    CHECK(pool.arena().used() == uint64_t{400} << 10);
    // More than any GPU has: refused up front with the sizes, not a crash later.
    CHECK_THROWS_AS(cuda_malloc_pool(0, uint64_t{1} << 50), BackendError);
}
