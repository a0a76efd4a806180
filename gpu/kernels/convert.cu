// Activations to half precision or bfloat16 for the tensor-core and cuBLAS matmuls.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "gpu/cuda_check.h"
#include "gpu/cuda_kernels.h"

namespace strata::gpu {
namespace {

// One thread per value, 256 per block.
template <bool kBf16>
__global__ void convert_kernel(const float* x, uint16_t* out, int64_t n) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = kBf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(x[i])) : __half_as_ushort(__float2half_rn(x[i]));
}

template <bool kBf16>
void convert(const float* x, uint16_t* out, int64_t n, CudaStream& s, const char* what) {
    if (n == 0) return;
    convert_kernel<kBf16><<<static_cast<unsigned>((n + 255) / 256), 256, 0, s.get()>>>(x, out, n);
    cuda_check_launch(what);
}

}  // namespace

void convert_f32_to_f16(const float* x, uint16_t* out, int64_t n, CudaStream& s) { convert<false>(x, out, n, s, "convert_f32_to_f16"); }
void convert_f32_to_bf16(const float* x, uint16_t* out, int64_t n, CudaStream& s) { convert<true>(x, out, n, s, "convert_f32_to_bf16"); }

}  // namespace strata::gpu
