#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <vector>

#include "planner/ring_pipeline.h"

using strata::planner::ring_pipeline_s;

TEST_CASE("ring pipeline: nothing streamed is the sum of the layers and the tail", "[unit][planner]") {
    CHECK(ring_pipeline_s({1, 2, 3}, {0, 0, 0}, 0.5, 3) == Approx(6.5));
}

TEST_CASE("ring pipeline: one buffer serialises each read with the compute before it", "[unit][planner]") {
    // A read may start only once the one buffer's layer has been computed: read, compute, read, ...
    CHECK(ring_pipeline_s({1, 1, 1}, {1, 1, 1}, 0, 1) == Approx(6));
}

TEST_CASE("ring pipeline: a run of streamed layers after resident ones waits for the disk", "[unit][planner]") {
    // Ten resident layers of 1 s, then four streamed layers (2 s to read, 0.1 s to compute), two
    // buffers. By hand, in the steady state: the next pass's first two streamed layers are read
    // during the resident run; the third may start reading once the first is computed (at
    // 10.1 s: lands 12.1 s, computed 12.2 s), the fourth once the disk is free (14.1 s,
    // computed 14.2 s). Streams overlapping without a bound would take max(10.4, 8) s.
    std::vector<double> compute(10, 1.0), read(10, 0.0);
    for (int i = 0; i < 4; ++i) compute.push_back(0.1), read.push_back(2.0);
    CHECK(ring_pipeline_s(compute, read, 0, 2) == Approx(14.2));
    // Enough buffers for every streamed layer: all four are read during the resident run.
    CHECK(ring_pipeline_s(compute, read, 0, 4) == Approx(10.4));
}

TEST_CASE("ring pipeline: bounded by the busier stream and by no overlap, and never slower with more buffers",
          "[unit][planner]") {
    const std::vector<double> compute{0.3, 0.1, 0.5, 0.2, 0.4, 0.1, 0.3}, read{0.0, 0.4, 0.2, 0.0, 0.6, 0.1, 0.3};
    const double c = std::accumulate(compute.begin(), compute.end(), 0.0), r = std::accumulate(read.begin(), read.end(), 0.0);
    double previous = 1e30;
    for (int slots = 1; slots <= 6; ++slots) {
        const double t = ring_pipeline_s(compute, read, 0, slots);
        CHECK(t >= std::max(c, r) - 1e-12);
        CHECK(t <= c + r + 1e-12);
        CHECK(t <= previous + 1e-12);
        previous = t;
    }
}
