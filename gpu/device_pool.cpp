#include "gpu/device_pool.h"

#include <fmt/format.h>

#include "gpu/cuda_check.h"

namespace strata::gpu {

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : pool_(o.pool_), data_(o.data_), offset_(o.offset_), bytes_(o.bytes_) {
    o.pool_ = nullptr;
    o.data_ = nullptr;
}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
        reset();
        pool_ = o.pool_;
        data_ = o.data_;
        offset_ = o.offset_;
        bytes_ = o.bytes_;
        o.pool_ = nullptr;
        o.data_ = nullptr;
    }
    return *this;
}
void DeviceBuffer::reset() {
    if (pool_) pool_->arena_.free(offset_);
    pool_ = nullptr;
    data_ = nullptr;
    bytes_ = 0;
}

DevicePool::DevicePool(uint64_t budget_bytes, int device) : arena_(budget_bytes) {
    cuda_check(cudaSetDevice(device), "cudaSetDevice");
    if (arena_.capacity() == 0) return;
    const cudaError_t err = cudaMalloc(&base_, arena_.capacity());
    if (err == cudaErrorMemoryAllocation) {
        size_t free_bytes = 0, total = 0;
        cudaGetLastError();  // clear the sticky allocation error before asking
        cudaMemGetInfo(&free_bytes, &total);
        throw BackendError(fmt::format("GPU {}: cannot allocate the --gpu-mem budget of {}: {} of {} free",
                                       device, format_bytes(arena_.capacity()),
                                       format_bytes(free_bytes), format_bytes(total)),
                           "lower --gpu-mem, or stop the other processes using the GPU");
    }
    cuda_check(err, "cudaMalloc of the GPU pool");
}

DevicePool::~DevicePool() {
    if (base_) cudaFree(base_);
}

DeviceBuffer DevicePool::allocate(uint64_t bytes, std::string_view what) {
    const uint64_t offset = arena_.allocate(bytes, what);
    return DeviceBuffer(this, static_cast<char*>(base_) + offset, offset, bytes);
}

}  // namespace strata::gpu
