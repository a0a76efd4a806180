#pragma once
// Shared by the GPU tests: the skip when no GPU is usable, and host <-> device helpers.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "gpu/cuda_devices.h"
#include "gpu/cuda_stream.h"
#include "gpu/device_pool.h"

namespace strata::gpu::test {

// True when a CUDA GPU is usable. Otherwise (a build without CUDA, no driver, no device) it
// warns "skipped: no CUDA GPU (why)" and the test returns: these tests pass vacuously there and
// must be run on a GPU machine (ctest -L gpu).
inline bool have_cuda_gpu() {
    const DeviceList list = list_devices();
    if (!list.devices.empty()) return true;
    WARN("skipped: no CUDA GPU (" << list.why_none << ")");
    return false;
}

// A pool and a stream for a test, with copies that finish before they return.
struct TestGpu {
    DevicePool pool{uint64_t{256} << 20};
    Stream stream;

    template <class T>
    DeviceBuffer upload(const std::vector<T>& host) {
        DeviceBuffer b = pool.allocate(host.size() * sizeof(T), "test input");
        copy_h2d(b.data(), host.data(), host.size() * sizeof(T), stream);
        stream.synchronize();
        return b;
    }
    DeviceBuffer zeros(size_t bytes) {
        DeviceBuffer b = pool.allocate(bytes, "test output");
        fill_zero(b.data(), bytes, stream);
        return b;
    }
    template <class T>
    std::vector<T> download(const DeviceBuffer& b, size_t n) {
        std::vector<T> host(n);
        copy_d2h(host.data(), b.data(), n * sizeof(T), stream);
        stream.synchronize();
        return host;
    }
};

}  // namespace strata::gpu::test

// First statement of every [gpu] test.
#define STRATA_REQUIRE_CUDA_GPU()                          \
    do {                                                   \
        if (!::strata::gpu::test::have_cuda_gpu()) return; \
    } while (0)
