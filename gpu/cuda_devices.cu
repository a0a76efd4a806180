#include "gpu/cuda_devices.h"

#include <cuda_runtime.h>

namespace strata::gpu {

DeviceList list_devices() {
    DeviceList out;
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        out.why_none = std::string("CUDA runtime reports: ") + cudaGetErrorString(err);
        return out;
    }
    if (n == 0) out.why_none = "no CUDA device found";
    for (int i = 0; i < n; ++i) {
        cudaDeviceProp p{};
        if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
        out.devices.push_back({i, p.name, p.totalGlobalMem, p.major, p.minor});
    }
    return out;
}

}  // namespace strata::gpu
