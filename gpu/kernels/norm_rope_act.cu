// Per-row and element-wise kernels of the llama block, the GPU twins of cpu/norm_rope_act.h.
#include <cmath>

#include "gpu/cuda_check.h"
#include "gpu/cuda_kernels.h"
#include "gpu/kernels/reduce.cuh"
#include "gpu/kernels/rope_angle.cuh"

namespace strata::gpu {
namespace {

constexpr int kRowThreads = 256;  // rms_norm: one block of 256 threads per row

// grid = n_rows, block = 256 threads striding over the row.
__global__ void rms_norm_kernel(const float* x, const float* w, float* y, int64_t n, float eps) {
    const float* xr = x + static_cast<int64_t>(blockIdx.x) * n;
    float* yr = y + static_cast<int64_t>(blockIdx.x) * n;
    const float scale = row_rms_scale<kRowThreads>(xr, n, eps);
    for (int64_t i = threadIdx.x; i < n; i += kRowThreads) yr[i] = xr[i] * scale * w[i];
}

// grid = (n_tokens, n_heads), block = 64 threads striding over the n_rot/2 rotation pairs of
// head blockIdx.y (a decode step's heads in parallel, not one after another on one SM).
__global__ void rope_kernel(float* x, const int32_t* pos, RopeArgs a) {
    rope_head(rope_row(x, blockIdx.x, a) + int64_t(blockIdx.y) * a.head_dim, pos[blockIdx.x], a, threadIdx.x, blockDim.x);
}

// Element-wise: one thread per value, 256 per block.
__global__ void swiglu_kernel(float* gate, const float* up, int64_t n) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) gate[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}
__global__ void add_kernel(float* y, const float* x, int64_t n) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) y[i] += x[i];
}
__global__ void add_rows_kernel(float* y, const float* b, int64_t n_rows, int64_t n) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n_rows * n) y[i] += b[i % n];
}
unsigned elementwise_blocks(int64_t n) { return static_cast<unsigned>((n + 255) / 256); }

}  // namespace

void rms_norm(const float* x, const float* w, float* y, int64_t n_rows, int64_t n, float eps, CudaStream& s) {
    if (n_rows == 0) return;
    rms_norm_kernel<<<static_cast<unsigned>(n_rows), kRowThreads, 0, s.get()>>>(x, w, y, n, eps);
    cuda_check_launch("rms_norm");
}

void rope(float* x, const int32_t* pos, int64_t n_tokens, const RopeArgs& a, CudaStream& s) {
    STRATA_ASSERT(a.n_rot % 2 == 0 && a.n_rot <= a.head_dim);
    if (n_tokens == 0) return;
    rope_kernel<<<dim3(static_cast<unsigned>(n_tokens), static_cast<unsigned>(a.n_heads)), 64, 0, s.get()>>>(x, pos, a);
    cuda_check_launch("rope");
}

void swiglu(float* gate, const float* up, int64_t n, CudaStream& s) {
    if (n == 0) return;
    swiglu_kernel<<<elementwise_blocks(n), 256, 0, s.get()>>>(gate, up, n);
    cuda_check_launch("swiglu");
}

void add(float* y, const float* x, int64_t n, CudaStream& s) {
    if (n == 0) return;
    add_kernel<<<elementwise_blocks(n), 256, 0, s.get()>>>(y, x, n);
    cuda_check_launch("add");
}

void add_rows(float* y, const float* b, int64_t n_rows, int64_t n, CudaStream& s) {
    if (n_rows * n == 0) return;
    add_rows_kernel<<<elementwise_blocks(n_rows * n), 256, 0, s.get()>>>(y, b, n_rows, n);
    cuda_check_launch("add_rows");
}

}  // namespace strata::gpu
