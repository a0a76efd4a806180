#pragma once
// Measured copy rates of a GPU, for the planner (`strata probe`): host to device and device to
// host from page-locked memory, and a device-to-device copy (read and write: the device
// memory's bandwidth as CUDA's bandwidthTest counts it). Each is the best of a few timed copies.
#include <cstddef>

namespace strata::gpu {

struct CopyRates {
    double h2d_gbps = 0, d2h_gbps = 0, device_gbps = 0;
};

// Throws BackendError when there is no usable device, or when the buffers cannot be had.
CopyRates measure_copy_rates(int device = 0, size_t bytes = size_t{256} << 20);

}  // namespace strata::gpu
