// The GPU copy-rate probe: positive rates, device memory faster than the PCIe link, and the
// fallback without a device.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "gpu/copy_rates.h"
#include "tests/unit/gpu/cuda_test_support.h"

using namespace strata;

TEST_CASE("gpu copy rates: H2D and D2H below device memory bandwidth", "[gpu]") {
    STRATA_REQUIRE_CUDA_GPU();
    const gpu::CopyRates r = gpu::measure_copy_rates(0, size_t{64} << 20);
    INFO("H2D " << r.h2d_gbps << ", D2H " << r.d2h_gbps << ", device " << r.device_gbps << " GB/s");
    CHECK(r.h2d_gbps > 1);
    CHECK(r.d2h_gbps > 1);
    CHECK(r.device_gbps > r.h2d_gbps);
    CHECK(r.device_gbps > r.d2h_gbps);
}

TEST_CASE("gpu copy rates: without a device the probe says why", "[unit]") {
    if (!gpu::list_devices().devices.empty()) STRATA_SKIP("this machine has a GPU (the [gpu] case covers it)");
    CHECK_THROWS_AS(gpu::measure_copy_rates(), BackendError);
}
