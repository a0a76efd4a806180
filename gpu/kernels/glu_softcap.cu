// Element-wise kernels of the layer program's variants beyond the llama block: gemma's GeGLU
// and the tanh soft cap of its logits, the GPU twins of cpu::geglu and cpu::softcap.
#include <cmath>

#include "gpu/cuda_check.h"
#include "gpu/cuda_kernels.h"

namespace strata::gpu {
namespace {

// One thread per value, 256 per block.
__global__ void geglu_kernel(float* gate, const float* up, int64_t n) {
    constexpr float kSqrt2OverPi = 0.7978845608028654f;
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float x = gate[i];
    gate[i] = 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * x * (1.0f + 0.044715f * x * x))) * up[i];
}
__global__ void softcap_kernel(float* x, int64_t n, float cap) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) x[i] = cap * tanhf(x[i] / cap);
}
unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + 255) / 256); }

}  // namespace

void geglu(float* gate, const float* up, int64_t n, CudaStream& s) {
    if (n == 0) return;
    geglu_kernel<<<blocks_for(n), 256, 0, s.get()>>>(gate, up, n);
    cuda_check_launch("geglu");
}

void softcap(float* x, int64_t n, float cap, CudaStream& s) {
    if (n == 0) return;
    softcap_kernel<<<blocks_for(n), 256, 0, s.get()>>>(x, n, cap);
    cuda_check_launch("softcap");
}

}  // namespace strata::gpu
