#pragma once
// The KV cache of the layers that do not fit DRAM, in a spill file on disk. Each layer has a
// K region and a V region of n_ctx rows (padded for O_DIRECT); a layer is read back, oldest
// position first, into a ring slot ahead of its turn, and the rows a pass adds are written
// back when the layer is done. The file is unlinked as soon as it is open, so it disappears
// when the process ends, however it ends.
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "runtime/kv_cache.h"

namespace strata {

class StreamRing;
namespace storage {
class MemoryBudget;
class PinnedPool;
class Reader;
}  // namespace storage

class KvSpill {
public:
    // Throws IoError naming the directory when the file cannot be made or the disk is full.
    KvSpill(int32_t n_layers, int32_t n_ctx, int32_t n_embd_kv, const KvSpillOptions& opts);
    ~KvSpill();

    void begin(int32_t layer);
    void end(int32_t layer, int64_t pos0, int64_t n);
    std::pair<float*, float*> current(int32_t layer) const;  // K and V of the begun layer
    void truncate(int32_t n_past);
    void set_trace(Trace* trace);
    uint64_t buffer_bytes() const;

    static uint64_t layer_bytes(int32_t n_ctx, int32_t n_embd_kv);

private:
    void write_rows(uint64_t region, uint64_t slot_offset, int64_t pos0, int64_t n);

    int32_t n_layers_;
    uint64_t row_bytes_;
    uint64_t region_bytes_;  // one side (K or V) of one layer, aligned
    int fd_ = -1;
    std::vector<int64_t> filled_;  // positions on disk per layer
    std::unique_ptr<storage::MemoryBudget> own_budget_;  // when the caller gave none
    std::unique_ptr<storage::PinnedPool> pool_;
    std::unique_ptr<storage::Reader> reader_;
    std::unique_ptr<StreamRing> ring_;
    int32_t current_layer_ = -1;
    std::byte* current_ = nullptr;
};

}  // namespace strata
