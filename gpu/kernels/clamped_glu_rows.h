#pragma once
// The device ops gpt-oss and deepseek2 add (kernels/clamped_glu_rows.cu): gpt-oss's clamped
// SwiGLU and a strided copy of rows (MLA's heads gathered into and out of their own products).
#include <cstdint>

#include "gpu/cuda_stream.h"

namespace strata::gpu {

// gate = g * sigmoid(alpha g) * (u + 1), g = min(gate, limit), u = clamp(up, -limit, limit): cpu::swiglu_clamped.
void swiglu_clamped(float* gate, const float* up, int64_t n, float alpha, float limit, CudaStream& s);
// n_rows rows of n floats, src_stride and dst_stride floats apart.
void copy_rows(float* dst, int64_t dst_stride, const float* src, int64_t src_stride, int64_t n_rows, int64_t n,
               CudaStream& s);

}  // namespace strata::gpu
