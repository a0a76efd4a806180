#pragma once
// The prefix cache's second tier: full blocks evicted from DRAM are kept on disk, so a later
// sequence that starts with the same tokens gets their keys and values back instead of
// computing them again. Each block's bytes across every layer fill one slot of a scratch file
// (runtime/kv/scratch_file.h); slots are found by the block's key (prefix_cache.h) and the
// least recently used one is reused first.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "runtime/kv/prefix_cache.h"
#include "storage/file_io.h"

namespace strata::runtime {

class ScratchFile;

class PrefixSpill {
public:
    // About `capacity_bytes` of slots of `block_bytes` each. Throws IoError naming the directory
    // when the file cannot be made.
    PrefixSpill(const std::filesystem::path& dir, uint64_t capacity_bytes, uint64_t block_bytes);
    ~PrefixSpill();

    int32_t n_slots() const { return static_cast<int32_t>(key_of_.size()); }
    int32_t n_held() const { return static_cast<int32_t>(slots_.size()); }
    bool contains(const BlockKey& key) const { return slots_.find(key) >= 0; }

    // Where a block's bytes are gathered before put() and found after take() (block_bytes).
    std::span<std::byte> staging() { return {staging_.get(), block_bytes_}; }
    // Saves the staged bytes under `key`, in the least recently used slot when all are taken.
    void put(const BlockKey& key);
    // Reads the bytes saved under `key` into staging() and frees their slot (the block is in
    // DRAM again); false when there are none.
    bool take(const BlockKey& key);

private:
    uint64_t block_bytes_;
    uint64_t slot_bytes_;  // block_bytes_ rounded up for O_DIRECT
    std::unique_ptr<ScratchFile> file_;
    PrefixCache slots_;                    // key -> slot
    std::vector<std::optional<BlockKey>> key_of_;  // slot -> key
    std::vector<uint64_t> used_at_;        // slot -> when last written
    uint64_t clock_ = 0;
    storage::AlignedBuffer staging_;
};

}  // namespace strata::runtime
