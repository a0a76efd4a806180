// The KV cache's element type as a compile-time kind for the attention and KV kernels.
#pragma once
#include <string>

#include "core/dtype.h"
#include "core/error.h"
#include "gpu/device.h"
#include "gpu/kernels/kv_blocks.h"

namespace strata::gpu {

// Calls fn(integral_constant<KvKind, kind>) for `type`.
template <class Fn>
void with_kv_kind(DType type, Fn&& fn) {
    using blocks::KvKind;
    switch (type) {
        case DType::F32: return fn(std::integral_constant<KvKind, KvKind::F32>{});
        case DType::F16: return fn(std::integral_constant<KvKind, KvKind::F16>{});
        case DType::BF16: return fn(std::integral_constant<KvKind, KvKind::BF16>{});
        case DType::Q8_0: return fn(std::integral_constant<KvKind, KvKind::Q8_0>{});
        case DType::Q4_0: return fn(std::integral_constant<KvKind, KvKind::Q4_0>{});
        default:
            throw BackendError("gpu: no KV cache kernels for " + std::string(dtype_name(type)),
                               "use --kv-type f16, bf16, q8_0, q4_0 or f32, or --attention cpu");
    }
}

// Where row t lies in a paged cache, in bytes: block table entry t / kKvBlockSize, row t % kKvBlockSize.
__device__ __forceinline__ int64_t kv_row_offset(const int32_t* table, int64_t t, int64_t row_stride, int64_t block_stride) {
    return table[t / kKvBlockSize] * block_stride + (t % kKvBlockSize) * row_stride;
}
// Row t's bytes in a paged cache.
__device__ __forceinline__ const uint8_t* kv_row_at(const void* cache, const int32_t* table, int64_t t,
                                                    int64_t row_stride, int64_t block_stride) {
    return static_cast<const uint8_t*>(cache) + kv_row_offset(table, t, row_stride, block_stride);
}

}  // namespace strata::gpu
