// Sums and maxima across the lanes of a warp.
#pragma once

namespace strata::gpu {

constexpr unsigned kFullMask = 0xFFFFFFFFu;

__device__ __forceinline__ float warp_sum(float v) {
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
}  // namespace strata::gpu
