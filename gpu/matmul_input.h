#pragma once
// What the CUDA matmuls read as their input: the transform applied to x on the way in, the form
// the chosen kernel reads, and which prepared input a stream's scratch holds.
#include <cstdint>

namespace strata::gpu {

// A matmul input's transform (gpu::MatmulArgs): RMSNorm by norm_w, or SwiGLU with swiglu_up.
struct InputTransform {
    const float* norm_w = nullptr;
    float norm_eps = 0.0f;
    const float* swiglu_up = nullptr;
    bool any() const { return norm_w || swiglu_up; }
    bool operator==(const InputTransform& o) const {
        return norm_w == o.norm_w && norm_eps == o.norm_eps && swiglu_up == o.swiglu_up;
    }
};

// The form a matmul kernel reads its input in: the CPU's two-level Q8x2 int8 blocks (or
// single-level, Q8) for the decode kernel of block types, half precision for the tensor cores,
// half or bfloat16 for cuBLAS, float; Direct: the float input as it is (no transform to apply).
enum class InputFormat : uint8_t { Q8x2, Q8, F16, BF16, F32, Direct };

// The input a stream's scratch holds (the last prepared), so that the next product of the same
// input reuses it (the later products of a Device::matmul_group).
struct PreparedInput {
    const float* x = nullptr;
    InputTransform in;
    int64_t n_tok = 0, n_cols = 0;
    InputFormat format = InputFormat::Direct;
    bool operator==(const PreparedInput& o) const {
        return x == o.x && in == o.in && n_tok == o.n_tok && n_cols == o.n_cols && format == o.format;
    }
};

}  // namespace strata::gpu
