// Float weights (F32, F16, BF16) as the kernels read them: one value, or 8 with 16-byte loads
// (p 16-byte aligned).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "gpu/kernels/block_common.h"

namespace strata::gpu {

__device__ __forceinline__ float weight_value(const float* p) { return *p; }
__device__ __forceinline__ float weight_value(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ float weight_value(const __nv_bfloat16* p) { return __bfloat162float(*p); }
template <class T>
__device__ __forceinline__ void weight_values8(const T* p, float out[8]) {
    if constexpr (sizeof(T) == 4) {
        const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
        out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w, out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
    } else {
        uint32_t u[4];
        blocks::load_u32x4_a16(reinterpret_cast<const uint8_t*>(p), u);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const uint16_t lo = u[i] & 0xFFFF, hi = u[i] >> 16;
            if constexpr (std::is_same_v<T, __half>) {
                out[2 * i] = blocks::half_to_f32(lo), out[2 * i + 1] = blocks::half_to_f32(hi);
            } else {
                out[2 * i] = blocks::bf16_to_f32(lo), out[2 * i + 1] = blocks::bf16_to_f32(hi);
            }
        }
    }
}

}  // namespace strata::gpu
