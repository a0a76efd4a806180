#pragma once
// A weight tensor in device memory, and a product with it as the device backend runs them
// (device_layer.cpp, device_experts.cpp).
#include <cstdint>

#include "core/dtype.h"
#include "gpu/device.h"

namespace strata::runtime {

struct DevWeight {
    DType type = DType::F32;
    const void* data = nullptr;
    int64_t n_rows = 0, n_cols = 0;
    explicit operator bool() const { return data != nullptr; }
    const float* f32() const { return static_cast<const float*>(data); }
};

// y = x W^T over n rows on `s`: rows [0, n_long) as one product, the rest (decode steps) in
// groups of gpu::Device::kRowWiseRows, so that each gets the bits it would get alone.
void project(gpu::Device& dev, gpu::Stream& s, const DevWeight& w, const float* x, float* y, int64_t n, int64_t n_long);

}  // namespace strata::runtime
