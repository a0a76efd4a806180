#pragma once
// Shared by the GPU tests: the skip when no GPU is usable, and host <-> device helpers.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "gpu/cuda_devices.h"
#include "gpu/cuda_stream.h"
#include "gpu/device_pool.h"
#include "tests/support/skip.h"

namespace strata::gpu::test {

// Why no CUDA GPU is usable (a build without CUDA, no driver, no device), or empty when one is.
inline std::string why_no_cuda_gpu() {
    const DeviceList list = list_devices();
    return list.devices.empty() ? "no CUDA GPU (" + list.why_none + ")" : std::string();
}

// A pool and a stream for a test, with copies that finish before they return.
struct TestGpu {
    static constexpr uint64_t kBytes = uint64_t{256} << 20;
    DevicePool pool{kBytes, cuda_malloc_pool(0, kBytes), cuda_free_pool};
    CudaStream stream;

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

// First statement of every [gpu] test: skips it (ctest reports it skipped) without a GPU.
#define STRATA_REQUIRE_CUDA_GPU()                                                    \
    do {                                                                             \
        if (const std::string why = ::strata::gpu::test::why_no_cuda_gpu(); !why.empty()) \
            STRATA_SKIP(why);                                                        \
    } while (0)
