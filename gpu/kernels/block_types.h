#pragma once
// Weight type -> its block decoder (block_dot_32.h, block_dot_k.h), for the kernels' dispatch
// and the host tests.
#include <string>

#include "core/dtype.h"
#include "core/error.h"
#include "gpu/kernels/block_dot_k.h"

namespace strata::gpu::blocks {

// Calls fn(Block{}) with the decoder of quantized type `type`; throws BackendError for others.
template <class Fn>
decltype(auto) with_block(DType type, Fn&& fn) {
    switch (type) {
        case DType::Q4_0: return fn(BlockQ4_0{});
        case DType::Q4_1: return fn(BlockQ4_1{});
        case DType::Q5_0: return fn(BlockQ5_0{});
        case DType::Q5_1: return fn(BlockQ5_1{});
        case DType::Q8_0: return fn(BlockQ8_0{});
        case DType::IQ4_NL: return fn(BlockIQ4_NL{});
        case DType::MXFP4: return fn(BlockMXFP4{});
        case DType::Q2_K: return fn(BlockQ2_K{});
        case DType::Q3_K: return fn(BlockQ3_K{});
        case DType::Q4_K: return fn(BlockQ4_K{});
        case DType::Q5_K: return fn(BlockQ5_K{});
        case DType::Q6_K: return fn(BlockQ6_K{});
        case DType::Q8_K: return fn(BlockQ8_K{});
        case DType::IQ4_XS: return fn(BlockIQ4_XS{});
        default:
            throw BackendError("gpu: no block decoder for weight type " + std::string(dtype_name(type)),
                               "run this model on the CPU (--device cpu)");
    }
}

// A span: 256 values of a row (8 chunks: eight blocks of 32, or one super-block), which the
// decode kernel reads whole with 16-byte loads where its bytes allow (kSpanLoads).
inline constexpr int64_t kSpanValues = 256, kSpanChunks = kSpanValues / kActBlock;
template <class B>
inline constexpr int kSpanBytes = B::kBytes * int(kSpanValues / B::kValues);
template <class B>
inline constexpr bool kSpanLoads = kSpanBytes<B> % 16 == 0;

// Block-quantized weight types with a decoder (the float types F32, F16 and BF16 have kernels
// of their own).
inline bool gpu_block_type(DType type) {
    switch (type) {
        case DType::Q4_0: case DType::Q4_1: case DType::Q5_0: case DType::Q5_1: case DType::Q8_0: case DType::IQ4_NL: case DType::MXFP4:
        case DType::Q2_K: case DType::Q3_K: case DType::Q4_K: case DType::Q5_K: case DType::Q6_K: case DType::Q8_K:
        case DType::IQ4_XS:
            return true;
        default:
            return false;
    }
}

}  // namespace strata::gpu::blocks
