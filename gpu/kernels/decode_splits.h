#pragma once
// How the decode attention kernel splits a row's keys (attention_decode.cu), host and device
// alike. A split is one thread block's serial work: its keys' reads wait on one another a batch
// at a time. Runs of 128 keys serve a deep row, whose splits fill the device; a shallow row's
// keys are cut into shorter runs (one KV block at least) so that it still gets about
// kShallowSplits thread blocks per KV head, as flash-decoding sizes its splits from the work.
// The length follows from the row's key count alone: a row gets the same splits, and so the same
// bits, whatever else its call holds (a batch, a draft tree's other rows, a wider block table).
#include <cstdint>

#include "core/kernel_shapes.h"
#include "gpu/kernels/block_common.h"

namespace strata::gpu::blocks {

inline constexpr int kDecodeSplitMaxKeys = 8 * kKvBlockSize;  // 128: a deep row's runs
inline constexpr int kShallowSplits = 16;  // per KV head: 128 thread blocks for llama3-8b's 8

// Keys in each split of a row of n_keys keys (the last split may hold fewer): a whole number of
// KV blocks, from one to eight.
STRATA_HD int decode_split_keys(int64_t n_keys) {
    const int64_t per_split = (n_keys + kShallowSplits - 1) / kShallowSplits;
    const int64_t blocks = (per_split + kKvBlockSize - 1) / kKvBlockSize;
    const int64_t keys = (blocks < 1 ? 1 : blocks) * kKvBlockSize;
    return static_cast<int>(keys < kDecodeSplitMaxKeys ? keys : kDecodeSplitMaxKeys);
}
// Splits that hold keys of a row of n_keys keys.
STRATA_HD int64_t decode_live_splits(int64_t n_keys) {
    const int64_t len = decode_split_keys(n_keys);
    return (n_keys + len - 1) / len;
}
// Splits a launch's grid holds for block tables of max_blocks blocks: the most any row of up to
// max_blocks * kKvBlockSize keys takes (kShallowSplits, or fewer blocks than that, below 16 x 128
// keys; one per 128 keys beyond).
STRATA_HD int64_t decode_grid_splits(int64_t max_blocks) {
    const int64_t deep = (max_blocks + 7) / 8;
    const int64_t shallow = max_blocks < kShallowSplits ? max_blocks : kShallowSplits;
    return deep > shallow ? deep : shallow;
}

}  // namespace strata::gpu::blocks
