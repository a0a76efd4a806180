#include "gpu/cuda_host.h"

#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "gpu/cuda_devices.h"
#include "storage/pinned_pool.h"

namespace strata::gpu {

namespace {
class CudaHostPinner final : public storage::HostPinner {
public:
    std::string_view name() const override { return "cudaHostRegister"; }
    std::string register_memory(void* base, size_t bytes) override {
        const cudaError_t err = cudaHostRegister(base, bytes, cudaHostRegisterDefault);
        return err == cudaSuccess ? std::string() : std::string(cudaGetErrorString(err));
    }
    void unregister_memory(void* base, size_t) noexcept override { cudaHostUnregister(base); }
};
}  // namespace

bool install_cuda_host_pinner() {
    if (list_devices().devices.empty()) return false;
    storage::set_host_pinner(std::make_shared<CudaHostPinner>());
    return true;
}

}  // namespace strata::gpu
