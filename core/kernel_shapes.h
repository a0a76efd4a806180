#pragma once
// The shapes the kernels work in, which the runtime lays its passes out by and the planner
// prices: one definition each, read by cpu/, gpu/, runtime/ and planner/ alike, so that a
// change to a kernel's shape reaches the cost model too.
#include <algorithm>
#include <cstdint>

namespace strata {

// Up to this many token rows a CPU matmul takes the decode strategy (one pass over the weights,
// each row with the bits it gets alone); more take the prefill strategy (cpu/matmul.h).
inline constexpr int64_t kCpuGemvTokens = 4;

// Query rows of one CPU attention tile: all the query heads of a KV head for as many tokens as
// fit (cpu/attention_cpu.cpp).
inline constexpr int64_t kAttentionTileRows = 32;

// A CPU attention segment of fewer query tokens than this (a decode step, a short draft chain)
// splits each row's keys into parts of kAttentionSplitKeys, each its own task, merged by
// log-sum-exp (flash-decoding): a long decode row then spreads over every thread, not over its
// few KV heads. Parts start at fixed key positions, so a row's result does not depend on the
// batch or the threads (cpu/attention_cpu.cpp).
inline constexpr int64_t kAttentionSplitTokens = 16;
inline constexpr int64_t kAttentionSplitKeys = 512;

// Decode rows a device matmul computes each as that row alone would give it (gpu/device.h): a
// batch's step reads the device's weights once per this many sequences (a batch of 16 in one
// pass over them, as the CUDA decode kernel takes it).
inline constexpr int64_t kDeviceRowWiseRows = 16;
// Decode products of one input (a layer's q, k and v) that one device launch takes at most.
inline constexpr int kDeviceLaunchProducts = 3;

// Routed rows the device experts' scratch takes before the host waits for them
// (runtime/exec/device/device_experts.h): every choice of a pass of `pass_tokens` tokens (each
// chooses n_expert_used experts), so that the host queues all of a layer's device rows and then
// computes its own experts while the device computes those; at most kDeviceExpertRows (a pass of
// 256 tokens choosing 8 experts each), and never fewer than a pass's tokens, the most one expert
// is given. A pass giving the device more waits for each fill before it queues the next.
inline constexpr int64_t kDeviceExpertRows = 2048;
constexpr int64_t device_expert_rows(int64_t pass_tokens, int64_t n_expert_used) {
    return std::max(pass_tokens, std::min(pass_tokens * std::max<int64_t>(n_expert_used, 1), kDeviceExpertRows));
}
// Its device bytes: each row's input and output (n_embd floats) and gate and up (n_ff_exp floats).
constexpr uint64_t device_expert_scratch_bytes(int64_t pass_tokens, int64_t n_expert_used, int64_t n_embd,
                                               int64_t n_ff_exp) {
    return uint64_t(device_expert_rows(pass_tokens, n_expert_used)) * uint64_t(2 * n_embd + 2 * n_ff_exp) * 4;
}

// Positions per block of the paged KV cache (runtime/kv/kv_cache.h), which every attention
// kernel (cpu/attention_cpu.h, gpu/device.h) reads as its key tile.
inline constexpr int32_t kKvBlockSize = 16;

}  // namespace strata
