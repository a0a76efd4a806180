#include <catch2/catch.hpp>

#include "core/error.h"
#include "planner/plan.h"
#include "runtime/weights/residency.h"

using namespace strata;
using namespace strata::runtime;
using planner::WeightOption;

namespace {
constexpr uint64_t kMiB = 1 << 20;
ResidencyInput input(uint64_t budget) {
    ResidencyInput in;
    in.budget = budget;
    in.fixed_bytes = 100 * kMiB;
    in.other_bytes = 50 * kMiB;
    in.layer_bytes = {40 * kMiB, 40 * kMiB, 40 * kMiB, 40 * kMiB, 40 * kMiB};
    in.prefetch_depth = 2;
    return in;
}
// A CPU plan keeping the first `n_resident` layers in DRAM and reading the rest from NVMe.
planner::Plan cpu_plan(int n_layer, int n_resident) {
    planner::Plan p;
    p.n_layer = n_layer;
    p.output = p.embedding = WeightOption::DramCpu;
    for (int il = 0; il < n_layer; ++il)
        p.layers.push_back({il, il < n_resident ? WeightOption::DramCpu : WeightOption::NvmeCpu, planner::KvOption::Dram,
                            planner::Device::Cpu});
    return p;
}
}  // namespace

TEST_CASE("residency: layers in DRAM are resident, layers on NVMe stream through depth + 1 buffers", "[unit][residency]") {
    for (uint64_t budget : {uint64_t{0}, 350 * kMiB}) {
        const auto r = residency_from_plan(cpu_plan(5, 5), input(budget));
        CHECK(r.n_streamed() == 0);
        CHECK(r.n_slots == 0);
        CHECK(r.resident_bytes == 300 * kMiB);
        CHECK(r.total_bytes == 350 * kMiB);
    }
    // 100 fixed + 50 other + one resident layer + 3 x 40 ring = 310 MiB.
    const auto r = residency_from_plan(cpu_plan(5, 1), input(349 * kMiB));
    CHECK(r.resident == std::vector<bool>{true, false, false, false, false});
    CHECK(r.n_slots == 3);
    CHECK(r.slot_bytes == 40 * kMiB);
    CHECK(r.total_bytes == 310 * kMiB);
    // Fewer streamed layers than the read-ahead: one buffer each.
    CHECK(residency_from_plan(cpu_plan(5, 4), input(0)).n_slots == 1);
}

TEST_CASE("residency: a plan that keeps more than the budget holds is refused with the budget it needs", "[unit][residency]") {
    try {
        residency_from_plan(cpu_plan(5, 3), input(300 * kMiB));
        FAIL("no OutOfBudget");
    } catch (const OutOfBudget& e) {
        // 100 + 50 + 3 x 40 resident + 2 x 40 ring = 350 MiB.
        CHECK_THAT(e.what(), Catch::Contains("keeps 3 of 5 layers resident") && Catch::Contains("350 MiB"));
        CHECK_THAT(e.hint(), Catch::Contains("--dram 350 MiB"));
    }
    CHECK_NOTHROW(residency_from_plan(cpu_plan(5, 3), input(350 * kMiB)));
}

TEST_CASE("residency: a plan this runtime cannot run is a usage error", "[unit][residency]") {
    CHECK_THROWS_AS(residency_from_plan(cpu_plan(4, 4), input(0)), UsageError);  // another model
    auto gpu = cpu_plan(5, 5);
    gpu.has_gpu = true;
    gpu.layers[2].weights = WeightOption::Gpu;
    CHECK_THROWS_WITH(residency_from_plan(gpu, input(0)), Catch::Contains("CPU only"));
}

TEST_CASE("residency: the smallest budget names what it must hold", "[unit][residency]") {
    // 100 fixed + 50 other + 3 x 40 ring.
    CHECK(full_ring_bytes(input(0)) == 120 * kMiB);
    CHECK_NOTHROW(check_min_budget(input(0), 270 * kMiB));  // no limit
    CHECK_NOTHROW(check_min_budget(input(270 * kMiB), 270 * kMiB));
    try {
        check_min_budget(input(269 * kMiB), 270 * kMiB);
        FAIL("no OutOfBudget");
    } catch (const OutOfBudget& e) {
        CHECK_THAT(e.what(), Catch::Contains("3 streaming buffers 120 MiB"));
        CHECK_THAT(e.hint(), Catch::Contains("--dram 270 MiB"));
    }
}

TEST_CASE("residency: a mixture of experts needs no more than its other tensors and one layer's experts", "[unit][residency][experts]") {
    ResidencyInput in = input(0);
    in.dense_bytes.assign(5, 4 * kMiB);  // each 40 MiB layer: 4 MiB of attention and router, 8 experts
    in.n_expert = 8;
    in.expert_slot_bytes = 4 * kMiB + 512 * 1024;  // aligned: 8 slots of 4.5 MiB round up to a huge page
    // Ring of 3 layers: 120 MiB. Experts: 20 MiB of other tensors + 8 slots (36 MiB) = 56 MiB.
    CHECK(least_weight_bytes(in) == 100 * kMiB + 20 * kMiB + ring_bytes(in.expert_slot_bytes, 8));
    CHECK(ring_bytes(in.expert_slot_bytes, 8) == 36 * kMiB);
    in.budget = 150 * kMiB;
    try {
        check_min_budget(in, least_weight_bytes(in) + in.other_bytes);
        FAIL("no OutOfBudget");
    } catch (const OutOfBudget& e) {
        CHECK_THAT(e.what(), Catch::Contains("a cache of one layer's 8 experts 56 MiB"));
        CHECK_THAT(e.hint(), Catch::Contains("--dram 206 MiB"));
    }
    // A dense model, or experts larger than the ring, keep the ring's floor.
    in.expert_slot_bytes = 20 * kMiB;
    CHECK(least_weight_bytes(in) == 100 * kMiB + full_ring_bytes(in));
}
