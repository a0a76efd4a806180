#include "runtime/residency.h"

#include <algorithm>

#include <fmt/format.h>

#include "runtime/core/error.h"
#include "storage/budget.h"
#include "storage/file_io.h"
#include "storage/pinned_pool.h"

namespace strata {

uint64_t ring_bytes(uint64_t slot_bytes, int n_slots) {
    if (n_slots == 0) return 0;
    // As storage::PinnedPool lays it out: page-aligned slots in one huge-page-aligned mapping.
    const uint64_t stride = storage::align_up(slot_bytes, storage::kDefaultDioAlign);
    return storage::align_up(stride * static_cast<uint64_t>(n_slots), storage::kHugePageBytes);
}

int Residency::n_streamed() const { return static_cast<int>(std::count(resident.begin(), resident.end(), false)); }

Residency choose_residency(const ResidencyInput& in) {
    const int n = static_cast<int>(in.layer_bytes.size());
    Residency r;
    r.resident.assign(n, true);
    uint64_t all = in.fixed_bytes + in.other_bytes;
    for (auto b : in.layer_bytes) all += b;
    if (in.budget == 0 || all <= in.budget) {
        r.resident_bytes = all - in.other_bytes;
        r.total_bytes = all;
        return r;
    }

    // Streaming: the ring must hold the largest layer (any layer may end up streamed) in
    // depth + 1 slots (the one being computed and `depth` being read).
    const uint64_t largest = n ? *std::max_element(in.layer_bytes.begin(), in.layer_bytes.end()) : 0;
    const int slots = std::min(n, std::max(1, in.prefetch_depth + 1));
    const uint64_t ring = ring_bytes(largest, slots);
    const uint64_t floor = in.fixed_bytes + in.other_bytes + ring;
    if (floor > in.budget)
        throw OutOfBudget(fmt::format("the DRAM budget of {} is too small: the output head and embeddings take {}, "
                                      "the KV cache and activations {}, and {} streaming buffers {}",
                                      storage::format_bytes(in.budget), storage::format_bytes(in.fixed_bytes),
                                      storage::format_bytes(in.other_bytes), slots, storage::format_bytes(ring)),
                          fmt::format("use --dram {} or more, a smaller context (--ctx), or less read-ahead (--prefetch)",
                                      storage::format_bytes(floor)));

    uint64_t left = in.budget - floor;
    r.resident_bytes = in.fixed_bytes;
    for (int il = 0; il < n; ++il) {
        r.resident[il] = in.layer_bytes[il] <= left;
        if (r.resident[il]) {
            left -= in.layer_bytes[il];
            r.resident_bytes += in.layer_bytes[il];
        }
    }
    const int streamed = r.n_streamed();
    r.n_slots = std::min(slots, streamed);
    r.slot_bytes = largest;
    r.total_bytes = r.resident_bytes + in.other_bytes + ring_bytes(largest, r.n_slots);
    return r;
}

}  // namespace strata
