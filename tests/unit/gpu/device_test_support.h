#pragma once
// Tests of the device interface (gpu/device.h) run with the same body on every device, as
// candle's test_device!: the simulated device always ([unit]), a CUDA GPU where there is one
// ([gpu], skipped elsewhere).
#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>
#include <vector>

#include "gpu/device.h"
#include "tests/unit/gpu/cuda_test_support.h"

namespace strata::gpu::test {

// A device with one stream, and copies that finish before they return.
struct TestDevice {
    std::unique_ptr<Device> dev;
    std::unique_ptr<Stream> stream = dev->make_stream("test");

    template <class T>
    DeviceBuffer upload(const std::vector<T>& host) {
        DeviceBuffer b = dev->memory().allocate(host.size() * sizeof(T), "test input");
        dev->copy_h2d(b.data(), host.data(), host.size() * sizeof(T), *stream);
        stream->synchronize();
        return b;
    }
    DeviceBuffer zeros(size_t bytes) { return upload(std::vector<uint8_t>(bytes, 0)); }
    template <class T>
    std::vector<T> download(const DeviceBuffer& b, size_t n) {
        std::vector<T> host(n);
        dev->copy_d2h(host.data(), b.data(), n * sizeof(T), *stream);
        stream->synchronize();
        return host;
    }
};

inline constexpr uint64_t kTestDeviceBytes = uint64_t{256} << 20;

inline TestDevice sim_device(double link_gbps = 8) {
    SimOptions o;
    o.budget_bytes = kTestDeviceBytes;
    o.link_gbps = link_gbps;
    return {make_sim_device(o)};
}

}  // namespace strata::gpu::test

// Defines the test `name` on the simulated device and on CUDA; `body` takes a TestDevice&.
#define STRATA_DEVICE_TEST(name, body)                                                      \
    TEST_CASE("sim device: " name, "[unit][device]") {                                      \
        auto d = ::strata::gpu::test::sim_device();                                         \
        body(d);                                                                            \
    }                                                                                       \
    TEST_CASE("cuda device: " name, "[gpu]") {                                              \
        STRATA_REQUIRE_CUDA_GPU();                                                          \
        ::strata::gpu::test::TestDevice d{::strata::gpu::make_cuda_device(0, ::strata::gpu::test::kTestDeviceBytes)}; \
        body(d);                                                                            \
    }
