// Small host-to-device copies read by a kernel from mapped page-locked memory: they do not
// queue on a copy engine behind the layers' weights copied on another stream (a device
// layer's attention results, 16 KiB, waited a third of a millisecond there).
#include "gpu/cuda_check.h"
#include "gpu/cuda_kernels.h"

namespace strata::gpu {
namespace {

__global__ void mapped_copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, size_t n) {
    const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i];
}

}  // namespace

void copy_mapped_h2d(void* dst, const void* src, size_t bytes, CudaStream& s) {
    const size_t n = bytes / sizeof(uint4);
    if (n == 0) return;
    mapped_copy_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s.get()>>>(static_cast<const uint4*>(src),
                                                                                   static_cast<uint4*>(dst), n);
    cuda_check_launch("copy_mapped_h2d");
}

}  // namespace strata::gpu
