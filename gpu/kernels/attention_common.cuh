// What the decode and prefill attention kernels share: the score transform, the launch checks.
#pragma once
#include <cmath>

#include "gpu/cuda_check.h"
#include "gpu/device.h"
#include "gpu/kernels/kv_kind.cuh"
#include "gpu/kernels/reduce.cuh"

namespace strata::gpu {

// A scaled score after the soft cap (cap 0: none), as cpu::softcap_scores.
__device__ __forceinline__ float capped(float s, float cap) { return cap > 0.0f ? cap * tanhf(s / cap) : s; }

// Lanes that share one key's dot product, eight values each: a power of two, at most a warp.
__host__ __device__ inline int attention_key_lanes(int head_dim) {
    int lanes = 1;
    while (lanes < 32 && 8 * lanes * 2 <= head_dim) lanes *= 2;
    return lanes;
}
// Values per value head: the key head's unless narrower (MLA).
__host__ __device__ inline int value_dim(const DecodeAttentionArgs& a) { return a.v_head_dim > 0 ? a.v_head_dim : a.head_dim; }
inline float attention_scale(const DecodeAttentionArgs& a) {
    return a.scale > 0.0f ? a.scale : 1.0f / std::sqrt(float(a.head_dim));
}
// Whether keys may be read eight values at a time: whole groups of eight in a head and, for the
// float types read with 16-byte loads, 16-byte aligned rows.
inline bool kv_eight_ok(const DecodeAttentionArgs& a) {
    if (a.head_dim % 8 != 0) return false;
    if (a.kv_type == DType::Q8_0 || a.kv_type == DType::Q4_0) return true;
    const auto aligned = [](uint64_t v) { return v % 16 == 0; };
    return aligned(reinterpret_cast<uintptr_t>(a.k)) && aligned(reinterpret_cast<uintptr_t>(a.v)) &&
           aligned(uint64_t(a.row_stride)) && aligned(uint64_t(a.block_stride));
}
// Lets `kernel` use `bytes` of dynamic shared memory (past the default 48 KiB needs asking).
template <class Kernel>
void allow_smem(Kernel kernel, size_t bytes) {
    // The kernel's own static arrays (at most 1152 bytes in these kernels: the decode split's
    // key rows and head sums) count toward the default 48 KiB too: asking for a little more
    // than needed does no harm.
    constexpr size_t kStaticSmemMargin = 2u << 10;
    if (bytes + kStaticSmemMargin > (48u << 10))
        cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
                   "cudaFuncSetAttribute (shared memory)");
}

}  // namespace strata::gpu
