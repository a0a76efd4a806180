// When a plan with a device is chosen over the CPU alone (planner/policy_search.h).
#include <catch2/catch.hpp>

#include <algorithm>

#include "core/error.h"
#include "planner/cost_model.h"
#include "planner/lp_placement.h"
#include "planner/policy_search.h"
#include "planner/rounding.h"
#include "tests/support/toy_hardware.h"
#include "tests/support/toy_shape.h"

using namespace strata;
using namespace strata::planner;

namespace {
// A prediction decoding at `tps` whose workload takes `objective_s` a generated token.
Prediction predicted(double tps, double objective_s) {
    Prediction p;
    p.decode_tps_per_seq = tps;
    p.objective_s = objective_s;
    return p;
}
}  // namespace

TEST_CASE("a device plan is chosen over the CPU alone when it decodes faster by the margin, or as fast and finishes "
          "the workload sooner by it",
          "[unit][planner]") {
    // A 512-token prompt and 16 tokens: the CPU alone prefills in 3.9 s and decodes at 22.7 t/s.
    const Prediction cpu = predicted(22.7, (3.88 + 16 / 22.7) / 16);
    // Faster decoding by the margin, whatever the prefill.
    CHECK(device_beats_cpu(predicted(kDeviceWinMargin * 22.7 * 1.01, cpu.objective_s * 2), cpu));
    // A near tie in decoding, its first token in 0.13 s: the whole request 3.6x sooner.
    CHECK(device_beats_cpu(predicted(23.5, (0.126 + 16 / 23.5) / 16), cpu));
    // Sooner over the workload but decoding slower: the CPU alone (never slower than it).
    CHECK_FALSE(device_beats_cpu(predicted(21.0, (0.126 + 16 / 21.0) / 16), cpu));
    // A near tie in both: the CPU alone.
    CHECK_FALSE(device_beats_cpu(predicted(23.5, cpu.objective_s / (kDeviceWinMargin * 0.99)), cpu));
    // No objective priced: decoding alone decides.
    CHECK_FALSE(device_beats_cpu(predicted(23.5, 0), cpu));
    // Which losing plans are searched again to decode no slower: those decoding slower whose
    // workload is sooner by the margin, not those decoding as fast, nor those no sooner.
    CHECK(trades_decode_for_prefill(predicted(21.0, (0.126 + 16 / 21.0) / 16), cpu));
    CHECK_FALSE(trades_decode_for_prefill(predicted(22.7, (0.126 + 16 / 22.7) / 16), cpu));
    CHECK_FALSE(trades_decode_for_prefill(predicted(21.0, cpu.objective_s / (kDeviceWinMargin * 0.99)), cpu));
    CHECK_FALSE(trades_decode_for_prefill(predicted(21.0, 0), cpu));
}

TEST_CASE("a device plan that decodes slower for a long prompt's first token is searched again to decode no slower "
          "than the CPU alone",
          "[unit][planner]") {
    // The toy model's four 1 GB layers, a 1000-token prompt: the CPU passes over a layer in 0.1 s
    // a token and computes a prompt's in 10 s; the link copies one in 0.2 s, a device with room for
    // about one computes a prompt's at once. Without op offload the device prefills only the
    // layers it holds or streams, and a streamed layer decodes at the link's half of the CPU's rate.
    const ModelShape s = test::toy_shape();
    HardwareProfile hw = test::toy_cpu_with_gpu();
    hw.gpu->h2d_gbps = hw.gpu->d2h_gbps = 5;
    const Workload wl{1000, 16, 1, Objective::Latency};
    PlannerOptions opts;
    opts.budgets = {3.5e9, 60e9, 1e12};
    HardwareProfile alone = hw;
    alone.gpu.reset();
    PlannerOptions cpu_opts = opts;
    cpu_opts.budgets.gpu = 0;
    const Prediction cpu = search_plans(s, alone, wl, cpu_opts).best.prediction;
    const Prediction best = search_plans(s, hw, wl, opts).best.prediction;
    INFO("CPU alone " << cpu.decode_tps_per_seq << " t/s, TTFT " << cpu.ttft_s << " s; best with the device "
                      << best.decode_tps_per_seq << " t/s, TTFT " << best.ttft_s << " s");
    REQUIRE_FALSE(device_beats_cpu(best, cpu));
    REQUIRE(trades_decode_for_prefill(best, cpu));

    opts.max_decode_step_s = cpu.decode.time_s;
    const Plan bounded = search_plans(s, hw, wl, opts).best;
    INFO("bounded: " << bounded.prediction.decode_tps_per_seq << " t/s, TTFT " << bounded.prediction.ttft_s << " s");
    CHECK(std::any_of(bounded.layers.begin(), bounded.layers.end(),
                      [](const LayerPlacement& l) { return device_of(l.weights) == Device::Gpu; }));
    CHECK(bounded.prediction.decode.time_s <= cpu.decode.time_s * (1 + 1e-6));
    CHECK(bounded.prediction.objective_s >= best.objective_s);
    CHECK(device_beats_cpu(bounded.prediction, cpu));
    // Rounding keeps a plan within the bound: the bounded LP's answers round past it unless told
    // (the relaxation overlaps the link's copies with the CPU's layers more than whole layers
    // can, and rounding's improving moves chase the objective).
    const CostModel cm(s, hw, wl, bounded.policy);
    const std::vector<LayerGroup> groups = group_layers(s);
    int past = 0;
    for (const LpCase& lc : lp_cases(cm, groups)) {
        // As the policy search solves it again: staging reserved for whole layers.
        LpCase whole = lc;
        whole.max_decode_s = cpu.decode.time_s;
        whole.min_gpu_staging = solve_placement(cm, opts.budgets, groups, whole).gpu_staging_need;
        const LpSolution sol = solve_placement(cm, opts.budgets, groups, whole);
        Plan free_plan = bounded, kept = bounded;
        if (!sol.feasible || sol.decode_s > cpu.decode.time_s || !round_plan(cm, opts.budgets, sol, free_plan) ||
            free_plan.prediction.decode.time_s <= cpu.decode.time_s)
            continue;
        ++past;
        REQUIRE(round_plan(cm, opts.budgets, sol, kept, cpu.decode.time_s));
        CHECK(kept.prediction.decode.time_s <= cpu.decode.time_s * (1 + 1e-6));
    }
    CHECK(past > 0);
    // An answer copying every layer in each step, rounded past the bound as it is: moved within it.
    LpSolution copied = solve_placement(cm, opts.budgets, groups);
    for (GroupSolution& g : copied.groups) {
        g.weights.fill(0);
        g.weights[static_cast<int>(WeightOption::DramToGpu)] = 1;
    }
    Plan as_is = bounded, moved = bounded;
    REQUIRE(round_plan(cm, opts.budgets, copied, as_is));
    REQUIRE(as_is.prediction.decode.time_s > cpu.decode.time_s);
    REQUIRE(round_plan(cm, opts.budgets, copied, moved, cpu.decode.time_s));
    CHECK(moved.prediction.decode.time_s <= cpu.decode.time_s * (1 + 1e-6));
    CHECK(moved.prediction.objective_s < cpu.objective_s);
    // A bound no plan with the device meets but the CPU alone's own: nothing faster than it.
    opts.max_decode_step_s = cpu.decode.time_s / 100;
    CHECK_THROWS_AS(search_plans(s, hw, wl, opts), OutOfBudget);
}
