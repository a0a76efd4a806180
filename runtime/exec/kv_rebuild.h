#pragma once
// Recomputation of keys and values from saved hidden states (KVPR, HCache): for a layer whose
// KV cache keeps each position's attention input (KvCache::rebuilt), the positions a pass
// attends to but does not compute are rebuilt before its attention (here on the CPU; the CUDA
// backend does the same on the device from rows_to_rebuild): K = x Wk^T prepared as the
// forward pass prepares keys (qk_prep: bias, QK-norm, RoPE at its position), V = x Wv^T (+ bv),
// into the cache's rebuild slot. The pass's own
// tokens store their K and V there as usual, and their inputs as the layer's saved rows.
// For block-quantized weights cpu::matmul gives a row the bits it had when first computed, so
// with an F32 cache a rebuilt run is bit-identical to one that keeps K and V; float weights
// may round a row differently than its first computation did.
#include <cstdint>
#include <span>
#include <vector>

#include "cpu/norm_rope_act.h"
#include "models/hparams.h"
#include "runtime/exec/backend.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/weights/model_weights.h"

namespace strata::runtime {

// A position whose K and V a pass rebuilds: row `row` of KV block `block`.
struct RebuildRow {
    int32_t block, row;
    int64_t pos;
};
// Positions [0, pos0) of every segment's sequence, each block once (sequences may share blocks).
void rows_to_rebuild(const KvCache& kv, std::span<const PassLayout::Segment> segments, std::vector<RebuildRow>& out);

class KvRebuilder {
public:
    explicit KvRebuilder(const models::Hparams& hp) : hp_(hp) {}

    // Rebuilds `rows` (rows_to_rebuild of the pass) in layer il. Runs its matmuls on the
    // thread pool (call inside its arena).
    void rebuild(std::span<const RebuildRow> rows, const LayerWeights& l, const cpu::RopeParams& rope, KvCache& kv, int il,
                 bool int8_acts);

private:
    void run(std::span<const RebuildRow> rows, const LayerWeights& l, const cpu::RopeParams& rope, KvCache& kv, int il,
             bool int8_acts);

    const models::Hparams& hp_;
    std::vector<float> x_, k_, v_;  // chunk x n_embd inputs, chunk x n_embd_kv outputs
};

}  // namespace strata::runtime
