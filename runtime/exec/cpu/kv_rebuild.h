#pragma once
// Recomputation of keys and values from saved hidden states (KVPR, HCache): for a layer whose
// KV cache keeps each position's attention input (KvCache::rebuilt), the positions a pass
// attends to but does not compute are rebuilt before its attention, on the CPU
// (CpuBackend::rebuild) or on the device: the layer program's key_value steps (its K and V
// products, prepared as the forward pass prepares them) run again on the saved inputs, into
// the cache's rebuild slot. The pass's own tokens store their K and V there as usual, and
// their inputs as the layer's saved rows.
// For block-quantized weights cpu::matmul gives a row the bits it had when first computed, so
// with an F32 cache a rebuilt run is bit-identical to one that keeps K and V; float weights
// may round a row differently than its first computation did.
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/exec/backend.h"
#include "runtime/kv/kv_cache.h"

namespace strata::runtime {

// A position whose K and V a pass rebuilds: row `row` of KV block `block`.
struct RebuildRow {
    int32_t block, row;
    int64_t pos;
};
// Positions [0, pos0) of every segment's sequence, each block once (sequences may share blocks).
void rows_to_rebuild(const KvCache& kv, std::span<const PassLayout::Segment> segments, std::vector<RebuildRow>& out);

}  // namespace strata::runtime
