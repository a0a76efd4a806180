#include "gpu/device_pool.h"

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

DevicePool::DevicePool(uint64_t budget_bytes, void* base, Release release)
    : arena_(budget_bytes), base_(base), release_(std::move(release)) {}

DevicePool::~DevicePool() {
    if (base_ && release_) release_(base_);
}

DeviceBuffer DevicePool::allocate(uint64_t bytes, std::string_view what) {
    const uint64_t offset = arena_.allocate(bytes, what);
    return DeviceBuffer(this, static_cast<char*>(base_) + offset, offset, bytes);
}

}  // namespace strata::gpu
