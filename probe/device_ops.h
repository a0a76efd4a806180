#pragma once
// A device's own ops, measured for `strata probe` through the device interface (gpu/device.h)
// with Strata's kernels, so that the simulated device and a CUDA GPU are measured by the same
// code: matmuls per weight type (one row a call, eight, and many), decode attention at a few
// depths, what an op costs beyond its work queued on a stream and inside a captured graph,
// copies from and to page-locked memory while the CPU streams DRAM, and a hop of a pass's data
// to the host and back.
#include <cstdint>
#include <vector>

#include "planner/hardware_profile.h"

namespace strata::gpu { class Device; }

namespace strata::probe {

// `llc_bytes`: the host's last-level cache as measured (the weights measured are larger, as a
// model's are, so that the simulated device reads them from DRAM). `quick`: smaller sizes,
// fewer repetitions, no narrow-layer or weight-pass measurements. The device needs about
// device_ops_bytes(...) of memory.
planner::DeviceOps measure_device_ops(gpu::Device& dev, const std::vector<DType>& types, bool quick, uint64_t llc_bytes);
uint64_t device_ops_bytes(bool quick, uint64_t llc_bytes);

// The simulated device on `threads` CPU threads, its copies unthrottled (their own rate is measured).
planner::DeviceOps measure_sim_device(const std::vector<DType>& types, int threads, bool quick, uint64_t llc_bytes);

}  // namespace strata::probe
