// planner/rounding: from the LP's shares to whole layers. Weights are never read from NVMe where
// DRAM has room for them, even where the disk's reads hide behind the CPU's compute and so cost
// the objective nothing.
#include <catch2/catch.hpp>

#include <optional>

#include "planner/cost_model.h"
#include "planner/lp_placement.h"
#include "planner/rounding.h"
#include "tests/support/toy_hardware.h"
#include "tests/support/toy_shape.h"

using namespace strata;
using namespace strata::planner;

namespace {

constexpr double kGB = 1e9;

// The toy model on the toy machine with a disk fast enough (100 GB/s) that reading a 1 GB layer
// (10 ms) hides behind the CPU's pass over it (100 ms at 10 GB/s): the objective cannot tell NVMe
// from DRAM. With a device or without, the CPU attending or not.
struct FastDisk {
    ModelShape s = test::toy_shape();
    HardwareProfile hw = test::toy_cpu();
    Workload wl{100, 11, 1, Objective::Latency};
    Policy policy;
    std::optional<CostModel> cm;

    FastDisk(bool with_device, bool cpu_attention, const RuntimeLimits& limits = {})
        : policy{1, 1, cpu_attention, false, DType::F16} {
        hw.nvme.read_gbps = 100;
        if (with_device) hw.gpu = GpuProfile{"toy gpu", 8ull << 30, 1000, 100, 10, 10, "", 0};
        cm.emplace(s, hw, wl, policy, limits);
    }
    // The LP's `weights` shares rounded within `budgets`.
    Plan round(std::array<double, kNumWeightOptions> weights, const Budgets& budgets) const;
};

// One group of the toy's four layers, `weights` shares as given, KV in DRAM, the output head and
// hidden states with the CPU.
LpSolution shares(std::array<double, kNumWeightOptions> weights) {
    LpSolution sol;
    sol.feasible = true;
    GroupSolution g;
    g.first_layer = 0, g.n_layers = 4;
    g.weights = weights;
    g.kv[static_cast<size_t>(KvOption::Dram)] = 1;
    sol.groups.push_back(g);
    sol.output[static_cast<size_t>(WeightOption::DramCpu)] = 1;
    sol.hidden[static_cast<size_t>(HiddenOption::Dram)] = 1;
    return sol;
}

int count(const Plan& p, WeightOption o) {
    int n = 0;
    for (const LayerPlacement& l : p.layers) n += l.weights == o;
    return n;
}

constexpr size_t idx(WeightOption o) { return static_cast<size_t>(o); }

Plan FastDisk::round(std::array<double, kNumWeightOptions> weights, const Budgets& budgets) const {
    Plan p;
    p.has_gpu = hw.has_gpu();
    p.policy = policy;
    REQUIRE(round_plan(*cm, budgets, shares(weights), p));
    return p;
}

}  // namespace

TEST_CASE("rounding: layers copied to a device that has no room for their staging go to the CPU from DRAM, not NVMe",
          "[unit][planner]") {
    // One layer copied in, or three: the staging is the largest copied layer's, not a sum, so no
    // one or two of three moved free it.
    const double copied = GENERATE(0.25, 0.75);
    const FastDisk toy(true, false);
    std::array<double, kNumWeightOptions> w{};
    w[idx(WeightOption::DramCpu)] = 1 - copied, w[idx(WeightOption::DramToGpu)] = copied;
    // The device cannot stage a 1 GB layer twice; DRAM holds everything many times over.
    const Plan p = toy.round(w, {1 * kGB, 64 * kGB, 1000 * kGB});
    CHECK(count(p, WeightOption::DramCpu) == 4);
    CHECK(count(p, WeightOption::NvmeCpu) == 0);
    CHECK(p.prediction.used.nvme == 0);
}

TEST_CASE("rounding: weights the LP left on NVMe move to DRAM while they fit, though the objective is the same",
          "[unit][planner]") {
    const FastDisk toy(false, true);
    std::array<double, kNumWeightOptions> w{};
    w[idx(WeightOption::NvmeCpu)] = 1;
    // The disk is hidden: all on NVMe prices as all in DRAM.
    const Plan all_in_dram = toy.round(w, {0, 64 * kGB, 1000 * kGB});
    CHECK(count(all_in_dram, WeightOption::DramCpu) == 4);
    Plan on_disk = all_in_dram;
    for (LayerPlacement& l : on_disk.layers) l.weights = WeightOption::NvmeCpu;
    CHECK(toy.cm->predict(on_disk).objective_s == Approx(all_in_dram.prediction.objective_s));
    // DRAM for two layers and the staging (two layers' buffers) the other two then need: two stay on NVMe.
    const Budgets half_budget{0, 4.5 * kGB, 1000 * kGB};
    const Plan half = toy.round(w, half_budget);
    CHECK(count(half, WeightOption::DramCpu) == 2);
    CHECK(count(half, WeightOption::NvmeCpu) == 2);
    CHECK(fits(half.prediction.used, half_budget));
}

TEST_CASE("rounding: with DRAM over and the device full, one more layer streams from NVMe to make room on the device",
          "[unit][planner]") {
    // The output head stays off NVMe, as in the runtimes.
    RuntimeLimits limits;
    limits.layers_only_on_nvme = true;
    const FastDisk toy(true, false, limits);
    // Half the layers held on the device, half read from NVMe by the CPU, every KV layer in DRAM.
    LpSolution sol = shares({});
    sol.groups[0].weights[idx(WeightOption::Gpu)] = 0.5, sol.groups[0].weights[idx(WeightOption::NvmeCpu)] = 0.5;
    Plan as_rounded;
    as_rounded.has_gpu = true, as_rounded.policy = toy.policy;
    as_rounded.layers.resize(4);
    for (int32_t i = 0; i < 4; ++i) {
        LayerPlacement& l = as_rounded.layers[static_cast<size_t>(i)];
        l.layer = i, l.kv = KvOption::Dram, l.attention = toy.cm->attention_device(l.kv);
        l.weights = i < 2 ? WeightOption::Gpu : WeightOption::NvmeCpu;
    }
    as_rounded.output = WeightOption::DramCpu, as_rounded.embedding = WeightOption::Gpu, as_rounded.hidden = HiddenOption::Dram;
    const MemoryUse u = toy.cm->predict(as_rounded).used;
    const double kv_layer = toy.cm->layer_kv(0, KvOption::Dram).bytes[static_cast<size_t>(Tier::Dram)];
    REQUIRE(kv_layer > 0);
    // The device full, DRAM half a KV layer short: every single move overflows a tier (the head
    // or a KV layer to the device, a layer to NVMe frees only the device), but a third layer read
    // from NVMe (its DRAM staging already there) leaves the device room for a unit DRAM sheds.
    const Budgets budgets{u.gpu, u.dram - kv_layer / 2, 1000 * kGB};
    Plan p;
    p.has_gpu = true, p.policy = toy.policy;
    REQUIRE(round_plan(*toy.cm, budgets, sol, p));
    CHECK(fits(p.prediction.used, budgets));
    CHECK(count(p, WeightOption::Gpu) == 1);
    CHECK(count(p, WeightOption::NvmeCpu) == 3);
    CHECK(p.prediction.used.gpu > u.gpu - toy.s.layers[0].weight_bytes);
}
