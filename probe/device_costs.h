#pragma once
// The parts of a device's measurement besides its matmuls (probe/device_ops.h): decode attention
// at a few depths, an op's cost queued on a stream and inside a captured graph, copies from and
// to page-locked memory while the CPU streams DRAM, and a hop of a pass's data to the host and back.
#include <cstdint>

#include "planner/hardware_profile.h"

namespace strata::gpu {
class Device;
class DeviceBuffer;
class Stream;
}  // namespace strata::gpu

namespace strata::probe {

// `b` filled with `byte`, through a host buffer (the device's memory may not be the host's).
void fill(gpu::Device& dev, gpu::Stream& s, const gpu::DeviceBuffer& b, unsigned char byte);

// Device memory measure_device_costs takes.
uint64_t device_costs_bytes(bool quick);

// Sets ops.attention, op_overhead_us, graph_op_us, h2d_gbps, d2h_gbps, handoff_us and round_trip_us.
void measure_device_costs(gpu::Device& dev, gpu::Stream& s, bool quick, planner::DeviceOps& ops);

}  // namespace strata::probe
