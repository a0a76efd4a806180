#include "runtime/kv/prefix_spill.h"

#include <algorithm>

#include "core/bytes.h"
#include "core/error.h"
#include "core/log.h"
#include "runtime/kv/scratch_file.h"

namespace strata::runtime {

PrefixSpill::PrefixSpill(const std::filesystem::path& dir, uint64_t capacity_bytes, uint64_t block_bytes)
    : block_bytes_(block_bytes),
      slot_bytes_(storage::align_up(block_bytes, storage::kDefaultDioAlign)),
      staging_(storage::allocate_aligned(slot_bytes_)) {
    const auto n_slots = static_cast<int32_t>(std::max<uint64_t>(1, capacity_bytes / slot_bytes_));
    file_ = std::make_unique<ScratchFile>(dir, "prefix cache file", "--kv-spill", uint64_t(n_slots) * slot_bytes_);
    key_of_.resize(n_slots);
    used_at_.assign(n_slots, 0);
    STRATA_LOG_INFO("kv: evicted prefix-cache blocks go to {} ({} slots of {})", dir.string(), n_slots,
                    format_bytes(slot_bytes_));
}

PrefixSpill::~PrefixSpill() = default;

void PrefixSpill::put(const BlockKey& key) {
    int32_t slot = slots_.find(key);
    if (slot < 0) {
        // A free slot, else the least recently used one.
        slot = static_cast<int32_t>(std::min_element(used_at_.begin(), used_at_.end()) - used_at_.begin());
        if (key_of_[slot]) slots_.erase(*key_of_[slot]);
        key_of_[slot] = key;
        slots_.insert(key, slot);
    }
    used_at_[slot] = ++clock_;
    file_->write(uint64_t(slot) * slot_bytes_, {staging_.get(), slot_bytes_});
}

bool PrefixSpill::take(const BlockKey& key) {
    const int32_t slot = slots_.find(key);
    if (slot < 0) return false;
    storage::read_exact(file_->file(), uint64_t(slot) * slot_bytes_, {staging_.get(), slot_bytes_});
    slots_.erase(key);
    key_of_[slot].reset();
    used_at_[slot] = 0;  // free: reused first
    return true;
}

}  // namespace strata::runtime
