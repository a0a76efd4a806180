// Sums and maxima across the lanes of a warp, and a row's RMSNorm scale over a thread block.
#pragma once

#include <cstdint>

namespace strata::gpu {

constexpr unsigned kFullMask = 0xFFFFFFFFu;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(kFullMask, v, o);
    return v;
}
__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(kFullMask, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
    return v;
}
// Sum over aligned groups of `lanes` lanes (a power of two up to 32); every lane of the warp
// must call it.
__device__ __forceinline__ float group_sum(float v, int lanes) {
    for (int o = lanes / 2; o > 0; o /= 2) v += __shfl_xor_sync(kFullMask, v, o);
    return v;
}

// 1 / sqrt(mean(x^2) + eps) of row `x` of n values, on every thread of a block of kThreads
// (a multiple of 32), as cpu::rms_norm computes it: the squares summed in double, so that the
// order of the sum leaves the float scale as the CPU's in all but the rarest rows.
template <int kThreads>
__device__ float row_rms_scale(const float* x, int64_t n, float eps) {
    __shared__ double warp_sums[kThreads / 32];
    double ss = 0;
    for (int64_t i = threadIdx.x; i < n; i += kThreads) ss += double(x[i]) * double(x[i]);
    ss = warp_sum(ss);
    if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = ss;
    __syncthreads();
    double total = 0;
    for (int w = 0; w < kThreads / 32; ++w) total += warp_sums[w];
    return 1.0f / sqrtf(float(total / double(n)) + eps);
}

}  // namespace strata::gpu
