// The KV cache's element types on the device: float, half and bfloat16 read as float and written
// from float (round to nearest even), one overload per type so kernels are templates over it.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "core/dtype.h"
#include "gpu/cuda_check.h"

namespace strata::gpu {

__device__ __forceinline__ float kv_load(const float* p) { return *p; }
__device__ __forceinline__ float kv_load(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ float kv_load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void kv_put(float* p, float v) { *p = v; }
__device__ __forceinline__ void kv_put(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void kv_put(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

// Calls fn(T{}) with T the element type of `type`.
template <class Fn>
void with_kv_element(DType type, Fn&& fn) {
    switch (type) {
        case DType::F32: return fn(float{});
        case DType::F16: return fn(__half{});
        case DType::BF16: return fn(__nv_bfloat16{});
        default:
            throw BackendError("gpu: no KV cache kernels for " + std::string(dtype_name(type)),
                               "use --kv-type f16, bf16 or f32 with the GPU, or --attention cpu");
    }
}

}  // namespace strata::gpu
