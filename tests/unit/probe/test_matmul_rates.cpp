// probe/measure: the matmul probe gives every rate the cost model prices (never timed here).
#include <catch2/catch.hpp>

#include <cmath>

#include "cpu/quant.h"
#include "probe/measure.h"

using namespace strata;

TEST_CASE("the matmul probe measures the narrow layer's GEMM rate beside the wide one, the quick probe leaves it out",
          "[unit][probe]") {
    const planner::KernelRate full = probe::measure_matmul(DType::Q8_0, 2, false, 8u << 20);
    CHECK(full.gemv_gbps > 0);
    CHECK(full.gemm_gflops > 0);
    CHECK(std::isfinite(full.gemm_narrow_gflops));
    CHECK(full.gemm_narrow_gflops > 0);
    const planner::KernelRate quick = probe::measure_matmul(DType::Q8_0, 2, true, 8u << 20);
    CHECK(quick.gemm_gflops > 0);
    CHECK(quick.gemm_narrow_gflops == 0);
    CHECK(quick.gemm_at(576) == quick.gemm_gflops);
}

TEST_CASE("the matmul probe measures decode calls of 4 and 8 tokens, wide and on the narrow layer; the quick probe "
          "none of them",
          "[unit][probe]") {
    const planner::KernelRate full = probe::measure_matmul(DType::Q4_1, 2, false, 8u << 20);
    for (double rate : {full.rows4_gbps, full.rows8_gbps, full.rows4_narrow_gbps, full.rows8_narrow_gbps}) {
        CHECK(std::isfinite(rate));
        CHECK(rate > 0);
    }
    CHECK(full.rows_time_scale(8, 576) >= full.rows_time_scale(4, 576));
    CHECK(full.rows_time_scale(4, 576) >= 1);
    const planner::KernelRate quick = probe::measure_matmul(DType::Q4_1, 2, true, 8u << 20);
    CHECK(quick.rows4_gbps == 0);
    CHECK(quick.rows8_gbps == 0);
    CHECK(quick.rows_time_scale(4, 576) == 0);  // priced as before
    CHECK(quick.rows4_narrow_gbps == 0);
    CHECK(quick.rows8_narrow_gbps == 0);
}

TEST_CASE("the matmul probe measures the CPU giving its weights back as the file lays them out, none where it cannot",
          "[unit][probe]") {
    // Op offload's copies of the CPU's layers to a device are rebuilt at this rate: from the
    // tiles where this CPU tiles them, as a copy where it does not.
    for (const bool tiled : {true, false}) {
        const planner::KernelRate r = probe::measure_matmul(DType::Q4_0, 2, true, 8u << 20, tiled);
        CHECK(std::isfinite(r.untile_gbps));
        CHECK(r.untile_gbps > 0);
    }
    // Q8_K's tiles keep only what its kernels read: op offload reads its layers from the file.
    const planner::KernelRate q8k = probe::measure_matmul(DType::Q8_K, 2, true, 8u << 20);
    CHECK((q8k.untile_gbps > 0) == cpu::can_untile(DType::Q8_K, 4096));
}
