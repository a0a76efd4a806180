#pragma once
// Device memory within the --gpu-mem budget: one allocation of the whole budget at start-up
// (made by the device: cudaMalloc, or host memory for the simulated device), carved into
// aligned buffers (DeviceArena), so the engine never allocates on the device mid-decode and can
// never take more than the user allowed.
#include <cstdint>
#include <functional>
#include <string_view>

#include "gpu/device_arena.h"

namespace strata::gpu {

class DevicePool;

// A range of the pool, returned to it on destruction (move-only).
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    DeviceBuffer(DeviceBuffer&& o) noexcept;
    DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    ~DeviceBuffer() { reset(); }

    void reset();
    void* data() const { return data_; }
    template <class T>
    T* as() const { return static_cast<T*>(data_); }
    uint64_t bytes() const { return bytes_; }

private:
    friend class DevicePool;
    DeviceBuffer(DevicePool* pool, void* data, uint64_t offset, uint64_t bytes)
        : pool_(pool), data_(data), offset_(offset), bytes_(bytes) {}
    DevicePool* pool_ = nullptr;
    void* data_ = nullptr;
    uint64_t offset_ = 0;
    uint64_t bytes_ = 0;
};

class DevicePool {
public:
    using Release = std::function<void(void*)>;
    // Carves `budget_bytes` of device memory at `base`; `release(base)` frees it at the end.
    DevicePool(uint64_t budget_bytes, void* base, Release release);
    ~DevicePool();
    DevicePool(const DevicePool&) = delete;
    DevicePool& operator=(const DevicePool&) = delete;

    // Throws OutOfBudget naming `what`, the bytes and the budget when it does not fit.
    DeviceBuffer allocate(uint64_t bytes, std::string_view what);
    const DeviceArena& arena() const { return arena_; }
    // DeviceArena::set_limit: memory taken away (or given back) mid-run.
    void set_limit(uint64_t bytes) { arena_.set_limit(bytes); }

private:
    friend class DeviceBuffer;
    DeviceArena arena_;
    void* base_ = nullptr;
    Release release_;
};

}  // namespace strata::gpu
