// probe/device_ops: the simulated device's own ops measured through gpu::Device (never timed
// here: what is checked is that every figure the cost model prices from is there and sane).
#include <catch2/catch.hpp>

#include <cmath>

#include "probe/device_ops.h"

using namespace strata;

TEST_CASE("the device probe measures the simulated device's matmuls, attention, launches and copies", "[unit][probe]") {
    const planner::DeviceOps o = probe::measure_sim_device({DType::Q4_0, DType::Q8_0}, 1, true, 8u << 20);
    CHECK(o.n_threads == 1);
    REQUIRE(o.rates.size() == 2);
    for (const auto& r : o.rates) {
        INFO(dtype_name(r.type));
        CHECK(r.gemv_gbps > 0);
        CHECK(r.rows4_gbps > 0);
        CHECK(r.rows8_gbps > 0);
        CHECK(r.rows16_gbps > 0);  // the device's calls take up to 16 rows
        CHECK(r.rows16_narrow_gbps == 0);  // a quick probe measures no narrow layer
        CHECK(r.gemm_gflops > 0);
        CHECK(std::isfinite(r.call_us));
    }
    REQUIRE(o.attention.size() >= 2);
    CHECK(o.attention.front().keys == 128);  // a short context's call, one split, measured as such
    for (size_t i = 1; i < o.attention.size(); ++i) CHECK(o.attention[i].keys > o.attention[i - 1].keys);
    for (const auto& a : o.attention) CHECK(a.us > 0);
    CHECK(o.op_overhead_us > 0);
    CHECK(o.graph_op_us > 0);  // the simulated device captures graphs
    CHECK(o.h2d_gbps > 0);
    CHECK(o.d2h_gbps > 0);
    CHECK(o.handoff_us >= 0);
    // The hop as a step makes it: the threads wake from sleep, and the host waits for its end.
    CHECK(o.round_trip_us > 0);
    CHECK(o.hop_us() == o.round_trip_us);
}
