#include "gpu/cuda_host.h"

#include <cuda_runtime.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gpu/cuda_devices.h"
#include "storage/pinned_pool.h"

namespace strata::gpu {

namespace {

// The ranges registered here: kernels may read them through their host addresses.
struct Registered {
    std::mutex mutex;
    std::vector<std::pair<const std::byte*, size_t>> ranges;
};
Registered& registered() {
    static Registered r;
    return r;
}

class CudaHostPinner final : public storage::HostPinner {
public:
    std::string_view name() const override { return "cudaHostRegister"; }
    std::string register_memory(void* base, size_t bytes) override {
        // With unified addressing the default flags map the memory for every device too.
        const cudaError_t err = cudaHostRegister(base, bytes, cudaHostRegisterDefault);
        if (err != cudaSuccess) return cudaGetErrorString(err);
        Registered& r = registered();
        const std::lock_guard lock(r.mutex);
        r.ranges.emplace_back(static_cast<const std::byte*>(base), bytes);
        return {};
    }
    void unregister_memory(void* base, size_t) noexcept override {
        {
            Registered& r = registered();
            const std::lock_guard lock(r.mutex);
            std::erase_if(r.ranges, [&](const auto& range) { return range.first == base; });
        }
        cudaHostUnregister(base);
    }
};
}  // namespace

bool install_cuda_host_pinner() {
    if (list_devices().devices.empty()) return false;
    storage::set_host_pinner(std::make_shared<CudaHostPinner>());
    return true;
}

bool host_mapped(const void* p, size_t bytes) {
    static const bool same_pointer = [] {
        int device = 0, yes = 0;
        return cudaGetDevice(&device) == cudaSuccess &&
               cudaDeviceGetAttribute(&yes, cudaDevAttrCanUseHostPointerForRegisteredMem, device) == cudaSuccess && yes;
    }();
    if (!same_pointer) return false;
    const auto* b = static_cast<const std::byte*>(p);
    Registered& r = registered();
    const std::lock_guard lock(r.mutex);
    for (const auto& [base, size] : r.ranges)
        if (b >= base && b + bytes <= base + size) return true;
    return false;
}

}  // namespace strata::gpu
