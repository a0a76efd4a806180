#include "gpu/device_arena.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "core/error.h"

namespace strata::gpu {
namespace {
// The arena's usable bytes: a tail shorter than the alignment can never hold a range.
uint64_t usable_bytes(uint64_t capacity, uint64_t alignment) {
    STRATA_ASSERT(alignment > 0 && (alignment & (alignment - 1)) == 0);
    return capacity / alignment * alignment;
}
}  // namespace

DeviceArena::DeviceArena(uint64_t capacity, uint64_t alignment)
    : capacity_(usable_bytes(capacity, alignment)), budget_("GPU", capacity_, "--gpu-mem"), alignment_(alignment) {
    if (capacity_ > 0) free_[0] = capacity_;
}

void DeviceArena::set_limit(uint64_t bytes) { budget_.set_limit(std::min(bytes, capacity_) / alignment_ * alignment_); }

uint64_t DeviceArena::allocate(uint64_t bytes, std::string_view what) {
    const uint64_t size = (std::max<uint64_t>(bytes, 1) + alignment_ - 1) / alignment_ * alignment_;
    try {
        budget_.reserve(size, what);
    } catch (const OutOfBudget& e) {
        throw DeviceOutOfMemory(e.what(), e.hint());  // the budget's standard message
    }
    for (auto it = free_.begin(); it != free_.end(); ++it) {
        if (it->second < size) continue;
        const uint64_t offset = it->first, left = it->second - size;
        free_.erase(it);
        if (left > 0) free_[offset + size] = left;
        used_[offset] = size;
        return offset;
    }
    budget_.release(size);
    throw DeviceOutOfMemory(fmt::format("GPU budget {}: {} requested by {}, {} free but the largest free range is {}",
                                  format_bytes(limit()), format_bytes(size), what,
                                  format_bytes(budget_.available()), format_bytes(largest_free())),
                      "free GPU buffers first, allocate long-lived buffers before short-lived ones, or raise --gpu-mem");
}

void DeviceArena::free(uint64_t offset) {
    const auto it = used_.find(offset);
    STRATA_ASSERT(it != used_.end());
    uint64_t start = offset, size = it->second;
    used_.erase(it);
    budget_.release(size);
    // Merge with the free neighbours so the arena does not fragment by itself.
    if (auto next = free_.find(start + size); next != free_.end()) {
        size += next->second;
        free_.erase(next);
    }
    if (auto next = free_.lower_bound(start); next != free_.begin()) {
        auto prev = std::prev(next);
        if (prev->first + prev->second == start) {
            start = prev->first;
            size += prev->second;
            free_.erase(prev);
        }
    }
    free_[start] = size;
}

uint64_t DeviceArena::largest_free() const {
    uint64_t best = 0;
    for (const auto& [offset, size] : free_) best = std::max(best, size);
    return best;
}

}  // namespace strata::gpu
