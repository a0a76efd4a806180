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
    h.nvme.name = "toy", h.nvme.capacity_bytes = 1ull << 40, h.nvme.read_gbps = 2, h.nvme.write_gbps = 1;
    return h;
}

// toy_cpu() with a GPU of 8 GiB beside it: 1000 GB/s, 100 TFLOPS, PCIe 10 GB/s each way.
inline planner::HardwareProfile toy_cpu_with_gpu() {
    planner::HardwareProfile h = toy_cpu();
    h.gpu = planner::GpuProfile{"toy gpu", 8ull << 30, 1000, 100, 10, 10, "", 0};
    return h;
}

// toy_cpu() beside a device of 1000 GB/s and 100 TFLOPS on a link of `link_gbps` each way, no
// launch or hand-off costs, a disk reading `disk_gbps` (the device's copies of streamed CPU
// layers are read from the file) and the CPU rebuilding layers it holds as the file lays them
// out at `rebuild_gbps` (the probe's rate for the toy model's weights, F16; 0: not measured,
// those copies read from the file too): by default both fast enough never to matter.
inline planner::HardwareProfile toy_op_offload_machine(double link_gbps, double disk_gbps = 1e6, double rebuild_gbps = 1e9) {
    planner::HardwareProfile h = toy_cpu();
    h.gpu = planner::GpuProfile{"toy gpu", 8ull << 30, 1000, 100, link_gbps, link_gbps, "", 0};
    h.nvme.read_gbps = disk_gbps;
    planner::KernelRate f16{DType::F16, h.cpu.gemv_gbps, h.cpu.gemm_gflops};  // the toy CPU's own rates
    f16.untile_gbps = rebuild_gbps;
    h.cpu.rates.push_back(f16);
    return h;
}

}  // namespace strata::test
