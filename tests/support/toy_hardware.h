#pragma once
// A CPU-only machine of round numbers for the planner's hand-computed tests: GEMV 10 GB/s,
// GEMM 100 GFLOPS, DRAM 20 GB/s, disk 2 GB/s read and 1 GB/s write, no per-layer overhead.
#include "planner/hardware_profile.h"

namespace strata::test {

inline planner::HardwareProfile toy_cpu() {
    planner::HardwareProfile h;
    h.name = "toy";
    h.cpu.gemv_gbps = 10, h.cpu.gemm_gflops = 100, h.cpu.attention_gbps = 10, h.cpu.attention_gflops = 100;
    h.cpu.layer_overhead_us = 0;
    h.dram = {"toy", 64ull << 30, 20, 10};
    h.nvme = {"toy", "", 1ull << 40, 2, 1};
    return h;
}

}  // namespace strata::test
