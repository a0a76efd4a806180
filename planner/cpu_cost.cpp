// CostModel's terms for the CPU's work beside its matmuls: a token's vector ops, the hand-offs
// of a layer's parallel loops, and attention over the KV cache at decode and in a prompt, from
// the probe's measured tile costs.
#include "planner/cost_model.h"

#include <algorithm>
#include <cmath>

#include "core/kernel_shapes.h"

namespace strata::planner {

namespace {
// Parallel loops of one CPU layer (runtime/exec/cpu/cpu_backend.cpp) beyond a decode step's matmul
// calls (q/k/v together, output, gate/up together, down: each pays the profile's call cost for
// its rows' width, its hand-off included): a decode step's attention; a pass of several tokens
// adds its four matmuls, the two norms, RoPE, SwiGLU and each matmul's activation quantization.
constexpr double kCpuLoopsDecode = 1, kCpuLoopsPass = 12;
// Query rows of one CPU attention tile; keys of one part of a split decode row.
constexpr double kTileRows = static_cast<double>(kAttentionTileRows);
constexpr double kSplitKeys = static_cast<double>(kAttentionSplitKeys);
}  // namespace

double CostModel::cpu_vector_s(double tokens, double threads) const {
    const VectorCost& v = hw_.cpu.vector;
    const double values = VectorCost::values(shape_.n_embd, shape_.n_head * shape_.head_dim, shape_.n_embd_kv(), shape_.n_ff);
    return tokens * (v.ns_per_token + v.ns_per_value * values) * 1e-9 / threads;
}

double CostModel::cpu_loops_s(double tokens) const {
    if (hw_.cpu.loop_us <= 0) return cpu_sync_s_;  // a catalog profile's per-layer figure
    return (tokens > 1 ? kCpuLoopsPass : kCpuLoopsDecode) * hw_.cpu.loop_us * 1e-6;
}

double CostModel::cpu_decode_attention_s(double threads, double seqs) const {
    const AttentionTileCost& t = *hw_.cpu.attention_tile;
    const double n_kv = shape_.n_head_kv, group = static_cast<double>(shape_.n_head) / shape_.n_head_kv;
    // The whole cache is read once per step, and the weights between two reads of a layer's
    // K/V: from DRAM when together they are larger than the last-level cache.
    const double step_bytes = B_ * ctx_avg_ * kvb_ * shape_.n_layer + static_cast<double>(shape_.total_weight_bytes());
    const bool cold = step_bytes > static_cast<double>(hw_.cpu.llc_bytes());
    // Every sequence's (KV head, tile of rows, part of the keys) tiles share one loop
    // (cpu::attention_batch): a tile holds the group's query heads of at most kTileRows / group
    // rows; one row longer than kAttentionSplitKeys keys is split into parts of that many (a
    // draft's rows are not split).
    const double rows = wl_.decode_rows, tok = std::max(1.0, std::floor(kTileRows / group));
    const double row_tiles = std::ceil(rows / tok);
    const double parts = rows > 1 ? 1.0 : std::max(1.0, std::ceil(ctx_avg_ / kSplitKeys));
    const double tile = t.tile_s(policy_.kv_type, ctx_avg_ / parts, std::min(rows, tok) * group, shape_.head_dim, cold, kvb_ / n_kv);
    const double tiles = std::ceil(seqs * n_kv * row_tiles * parts / threads) * tile;
    // All the threads together read no faster than DRAM serves them.
    return cold && dram_bw_ > 0 ? std::max(tiles, seqs * ctx_avg_ * kvb_ / dram_bw_) : tiles;
}

double CostModel::cpu_prefill_attention_s(double threads) const {
    const AttentionTileCost& t = *hw_.cpu.attention_tile;
    const double group = static_cast<double>(shape_.n_head) / shape_.n_head_kv;
    // Tiles of `tok` tokens (all their query heads); tile i sees the keys up to its last token.
    const double tok = std::max(1.0, std::floor(kTileRows / group)), n_tiles = std::ceil(P_ / tok);
    const double keys = tok * (n_tiles + 1) / 2;  // on average over the tiles
    const double per_seq_layer = shape_.n_head_kv * n_tiles * t.tile_s(policy_.kv_type, keys, tok * group, shape_.head_dim);
    return B_ * shape_.n_layer * per_seq_layer / threads;
}

}  // namespace strata::planner
