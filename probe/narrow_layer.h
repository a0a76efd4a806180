#pragma once
// A narrow layer's CPU matmul rates: small matrices give each thread few tiles and each call
// few rows per thread, which rates measured on wide matrices do not see.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>

#include "core/dtype.h"
#include "planner/hardware_profile.h"

namespace strata::cpu {
class ThreadPool;
}

namespace strata::probe {

// The seven matrices of a layer kNarrowCols wide, rows x values (the queries as wide, K and V a
// quarter, the feed-forward three times; SmolLM2's are about this wide), in the order q, k, v,
// the output, gate, up, down.
inline constexpr int64_t kNarrow = static_cast<int64_t>(planner::KernelRate::kNarrowCols);
inline constexpr std::pair<int64_t, int64_t> kNarrowLayer[] = {
    {kNarrow, kNarrow},     {kNarrow / 4, kNarrow}, {kNarrow / 4, kNarrow}, {kNarrow, kNarrow},
    {3 * kNarrow, kNarrow}, {3 * kNarrow, kNarrow}, {kNarrow, 3 * kNarrow}};

// Their GEMM rate over the wide one's: each given a call of 256 tokens (a prompt pass), then 64
// tokens over kWideCols rows of `wide` (kWideCols wide, `wide_tiled` as tile_weights left it),
// back to back, the median ratio of seven pairs (a busy moment skews one pair, not the median).
// SmolLM2's ran at 139-294 GFLOPS where 4096 x 4096 ran at 334. Like the engine, each call
// quantizes its tokens.
double narrow_over_wide(DType type, cpu::ThreadPool& pool, bool tile, const uint8_t* wide, bool wide_tiled);

// Their decode rate: one token through about `bytes` of such layers (from DRAM, as a model's
// layers), q/k/v and gate/up each one cpu::matmul_many call as the engine makes them, weights
// tiled (`tile`) as the engine holds them; weight bytes per second beyond the calls' costs as `r`
// prices them (KernelRate::call_s: the cost model adds those per call). Each pass is paired with
// one over the wide matrix (`wide_gbps`: its rate on a pool at so many tokens), and the median
// ratio of seven pairs times r.gemv_gbps gives r.gemv_narrow_gbps on `pool`, times
// r.gemv_thread_gbps r.gemv_thread_narrow_gbps on one thread alone; the same at 4 and 8 tokens
// times r.rows4_gbps and r.rows8_gbps (where measured) r.rows4_narrow_gbps and r.rows8_narrow_gbps.
void measure_narrow_gemv(DType type, cpu::ThreadPool& pool, bool tile, size_t bytes, planner::KernelRate& r,
                         const std::function<double(cpu::ThreadPool&, int64_t)>& wide_gbps);

}  // namespace strata::probe
