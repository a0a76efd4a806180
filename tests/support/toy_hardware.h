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

// toy_cpu() with a GPU of 8 GiB beside it: 1000 GB/s, 100 TFLOPS, PCIe 10 GB/s each way.
inline planner::HardwareProfile toy_cpu_with_gpu() {
    planner::HardwareProfile h = toy_cpu();
    h.gpu = planner::GpuProfile{"toy gpu", 8ull << 30, 1000, 100, 10, 10, "", 0};
    return h;
}

}  // namespace strata::test
