#pragma once
// What a CPU layer costs besides its matmuls, measured through the very kernels the forward pass
// runs (runtime/exec/cpu/cpu_backend): attention tiles (cpu::attention) and the per-token vector ops
// (norms, RoPE, SwiGLU, residual adds), and one parallel loop's hand-off to the pool's threads.
#include <vector>

#include "core/dtype.h"
#include "planner/hardware_profile.h"

namespace strata::probe {

// Fits the tile model of planner::AttentionTileCost from timed decode tiles (one per thread)
// of 2048 keys: head_dim 128 with 1 and 8 query rows, head_dim 64 with 8 rows, on F16, and
// each other KV type in `kv_types` at head_dim 128, 1 row; then F16 tiles of 1 row over layers
// of K and V four times `llc_bytes`, for the rate one thread reads a KV head's slices from DRAM.
planner::AttentionTileCost measure_attention_tile(int threads, const std::vector<DType>& kv_types, bool quick,
                                                  uint64_t llc_bytes);

// A token's vector ops on one thread (two RMS norms, RoPE on q and k, SwiGLU, two residual adds,
// the matmuls' activation quantization), from passes of 64 tokens at widths 4096 and 512.
planner::VectorCost measure_vector_cost(int threads, bool quick);

// Microseconds one cpu::parallel_for over the pool's threads takes with nothing to do.
double measure_loop_us(int threads, bool quick);

}  // namespace strata::probe
