// gpt-oss's clamped SwiGLU, the GPU twin of cpu::swiglu_clamped, and rows copied between
// strided layouts (one 2-D copy on the stream).
#include "gpu/kernels/clamped_glu_rows.h"

#include <cmath>

#include <cuda_runtime.h>

#include "gpu/cuda_check.h"

namespace strata::gpu {
namespace {

// One thread per value, 256 per block.
__global__ void swiglu_clamped_kernel(float* gate, const float* up, int64_t n, float alpha, float limit) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float g = fminf(gate[i], limit);
    const float u = fminf(fmaxf(up[i], -limit), limit);
    gate[i] = g / (1.0f + expf(-alpha * g)) * (u + 1.0f);
}

}  // namespace

void swiglu_clamped(float* gate, const float* up, int64_t n, float alpha, float limit, CudaStream& s) {
    if (n == 0) return;
    swiglu_clamped_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s.get()>>>(gate, up, n, alpha, limit);
    cuda_check_launch("swiglu_clamped");
}

void copy_rows(float* dst, int64_t dst_stride, const float* src, int64_t src_stride, int64_t n_rows, int64_t n,
               CudaStream& s) {
    if (n_rows == 0 || n == 0) return;
    cuda_check(cudaMemcpy2DAsync(dst, size_t(dst_stride) * 4, src, size_t(src_stride) * 4, size_t(n) * 4, size_t(n_rows),
                                 cudaMemcpyDeviceToDevice, s.get()),
               "copy_rows");
}

}  // namespace strata::gpu
