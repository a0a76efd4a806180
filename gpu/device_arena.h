#pragma once
// The bookkeeping of the GPU memory pool: byte ranges inside one arena of `capacity` bytes,
// first fit with coalescing on free. Holds no memory itself (DevicePool adds the cudaMalloc'ed
// base), so the budget rules are plain C++ and tested without a GPU.
#include <cstdint>
#include <map>
#include <string_view>

#include "storage/budget.h"

namespace strata::gpu {

class DeviceArena {
public:
    // Every range starts on a multiple of `alignment` (a power of two; 256 matches cudaMalloc,
    // so any kernel's vector loads stay aligned).
    explicit DeviceArena(uint64_t capacity, uint64_t alignment = 256);

    // Offset of a fresh range of at least `bytes` (rounded up to the alignment). Throws
    // DeviceOutOfMemory (an OutOfBudget) naming `what`, the need and the budget when it does not fit, and says so when
    // the free bytes would suffice but no single free range is large enough (fragmentation).
    uint64_t allocate(uint64_t bytes, std::string_view what);
    // Returns a range given by allocate; an unknown offset is a bug (asserts).
    void free(uint64_t offset);

    uint64_t capacity() const { return capacity_; }
    // Bytes the arena may hand out now: its capacity, less what was taken away (set_limit).
    uint64_t limit() const { return budget_.limit(); }
    // Lowers (or restores, up to the capacity) what the arena may hand out: when device memory
    // is taken away mid-run. Ranges already handed out stay; allocate refuses past the limit.
    void set_limit(uint64_t bytes);
    uint64_t alignment() const { return alignment_; }
    uint64_t used() const { return budget_.used(); }
    uint64_t largest_free() const;
    const storage::MemoryBudget& budget() const { return budget_; }

private:
    uint64_t capacity_;
    storage::MemoryBudget budget_;  // "GPU", set by --gpu-mem; its limit lowered when memory is taken away
    uint64_t alignment_;
    std::map<uint64_t, uint64_t> free_;  // offset -> size, no two adjacent
    std::map<uint64_t, uint64_t> used_;  // offset -> size
};

}  // namespace strata::gpu
