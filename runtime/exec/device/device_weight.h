#pragma once
// A weight tensor in device memory, and products with it as the device backend runs them
// (device_layer.cpp, device_experts.cpp).
#include <cstdint>
#include <span>

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

// A matmul input: rows of x, RMSNormed by norm_w or SwiGLUed with swiglu_up on the way into the
// products (gpu::MatmulArgs), so that the transform needs no pass of its own.
struct MatmulInput {
    const float* x = nullptr;
    const float* norm_w = nullptr;
    float norm_eps = 0.0f;
    const float* swiglu_up = nullptr;
};
// One product of an input: y = input W^T, or y += it.
struct MatmulOutput {
    DevWeight w;
    float* y = nullptr;
    bool accumulate = false;
};

// The products of one input over n rows on `s`: rows [0, n_long) as one product each, the rest
// (decode steps) in groups of gpu::Device::kRowWiseRows, so that each row gets the bits it would
// get alone. Each group of rows is one Device::matmul_group: the input prepared once (the CUDA
// device quantizes it once), products of one weight type in one launch.
void project(gpu::Device& dev, gpu::Stream& s, const MatmulInput& in, std::span<const MatmulOutput> outs, int64_t n,
             int64_t n_long);
// y = x W^T: one product of a plain input.
void project(gpu::Device& dev, gpu::Stream& s, const DevWeight& w, const float* x, float* y, int64_t n, int64_t n_long);

}  // namespace strata::runtime
