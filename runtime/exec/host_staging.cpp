#include "runtime/exec/host_staging.h"

#include <algorithm>
#include <type_traits>
#include <utility>

#include "storage/budget.h"
#include "storage/file_io.h"

namespace strata::runtime {

HostStaging::HostStaging(storage::MemoryBudget& dram, const Sizes& b) {
    // Lays the parts out from `base` (none yet: only sizes them) and returns the total.
    auto layout = [&](std::byte* base) {
        uint64_t offset = 0;
        auto take = [&](auto*& part, uint64_t bytes) {
            using T = std::remove_reference_t<decltype(*part)>;
            part = base ? reinterpret_cast<T*>(base + offset) : nullptr;
            offset += storage::align_up(std::max<uint64_t>(bytes, 1), 64);
        };
        take(embd, b.embd);
        take(ints, b.ints);
        take(tables, b.tables);
        take(q, b.q);
        take(k, b.k);
        take(v, b.v);
        take(attn, b.attn);
        take(logits, b.logits);
        take(rebuild, b.rebuild);
        return offset;
    };
    storage::PinnedPoolOptions po;
    po.slot_bytes = layout(nullptr);
    po.n_slots = 1;
    po.what = "device staging buffers";
    pool_ = std::make_unique<storage::PinnedPool>(dram, po);
    slot_ = std::move(*pool_->try_acquire());
    layout(slot_.data());
}

}  // namespace strata::runtime
