#include "runtime/exec/device/host_staging.h"

#include <algorithm>
#include <type_traits>
#include <initializer_list>
#include <utility>

#include "storage/budget.h"
#include "storage/file_io.h"

namespace strata::runtime {

namespace {
uint64_t part_bytes(uint64_t bytes) { return storage::align_up(std::max<uint64_t>(bytes, 1), 64); }
}  // namespace

uint64_t HostStaging::slot_bytes(const Sizes& b) {
    uint64_t total = 0;
    for (uint64_t part : {b.embd, b.ints, b.tables, b.masks, b.q, b.k, b.v, b.attn, b.logits, b.rebuild}) total += part_bytes(part);
    return total;
}

HostStaging::HostStaging(storage::MemoryBudget& dram, const Sizes& b) : buffer_(dram, slot_bytes(b), "device staging buffers") {
    // The parts in slot_bytes' order.
    std::byte* at = buffer_.data();
    auto take = [&](auto*& part, uint64_t bytes) {
        using T = std::remove_reference_t<decltype(*part)>;
        part = reinterpret_cast<T*>(at);
        at += part_bytes(bytes);
    };
    take(embd, b.embd);
    take(ints, b.ints);
    take(tables, b.tables);
    take(masks, b.masks);
    take(q, b.q);
    take(k, b.k);
    take(v, b.v);
    take(attn, b.attn);
    take(logits, b.logits);
    take(rebuild, b.rebuild);
}

}  // namespace strata::runtime
