// Block-quantized weight rows expanded to half precision, for the long products cuBLAS runs on
// the tensor cores (cuda_matmul.cpp). One thread per 8 values: it decodes them with the block's
// values8 (the CPU reference's arithmetic, as matmul_tiles does) and writes 16 bytes, so that
// neighbouring threads write neighbouring bytes.
#include <cuda_fp16.h>

#include "gpu/cuda_check.h"
#include "gpu/cuda_kernels.h"
#include "gpu/kernels/block_types.h"

namespace strata::gpu {
namespace {

using namespace blocks;

template <class B>
__global__ void dequantize_rows_kernel(const uint8_t* __restrict__ w, uint64_t row_bytes, int64_t n_cols, int64_t n_parts,
                                       __half* __restrict__ out) {
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n_parts) return;
    const int64_t parts_per_row = n_cols / 8, r = i / parts_per_row, p = i % parts_per_row;
    float v[8];
    B::values8(w + r * row_bytes, p / 4, int(p % 4), v);
    __half2 h[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) h[j] = __floats2half2_rn(v[2 * j], v[2 * j + 1]);
    *reinterpret_cast<uint4*>(out + r * n_cols + 8 * p) = *reinterpret_cast<const uint4*>(h);
}

}  // namespace

void dequantize_rows_f16(DType type, const void* w, int64_t n_rows, int64_t n_cols, uint16_t* out, CudaStream& s) {
    const int64_t n_parts = n_rows * (n_cols / 8);
    if (n_parts == 0) return;
    with_block(type, [&](auto block) {
        using B = decltype(block);
        dequantize_rows_kernel<B><<<static_cast<unsigned>((n_parts + 255) / 256), 256, 0, s.get()>>>(
            static_cast<const uint8_t*>(w), row_bytes(type, n_cols), n_cols, n_parts, reinterpret_cast<__half*>(out));
    });
    cuda_check_launch("dequantize_rows_f16");
}

}  // namespace strata::gpu
