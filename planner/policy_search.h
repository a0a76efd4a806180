#pragma once
// The planner's entry points. The outer search enumerates what the LP cannot express linearly
// — batch size (throughput objective), micro-batches, CPU attention on/off, recompute on/off,
// KV type — solves the placement LP for each, rounds it to whole layers, and keeps the plan
// with the best predicted time per generated token.
#include <string>
#include <vector>

#include "planner/cost_model.h"
#include "planner/hardware_profile.h"
#include "planner/model_shape.h"
#include "planner/plan.h"
#include "planner/workload.h"

namespace strata::planner {

struct PlannerOptions {
    Budgets budgets;                         // see default_budgets
    std::vector<DType> kv_types = {DType::F16};  // more than one: searched (lossy types only when asked)
    bool allow_cpu_attention = true;
    bool require_cpu_attention = false;  // with a GPU: only plans that attend on the CPU
    bool allow_recompute = true;
    int max_micro = 16;
    RuntimeLimits limits;  // what the runtime that runs the plan cannot do
    // Plans whose decode step takes at most this long (0: any): a device plan bounded to decode
    // no slower than the CPU alone (trades_decode_for_prefill).
    double max_decode_step_s = 0;
    // The way out when nothing fits, naming the flags of the command that plans (`strata plan`'s
    // here; a runtime command names its own).
    // What budgets.dram is of, where the caller took what else the run holds out of the user's
    // figure first (an infeasible plan's message says so; empty: the budget as given).
    std::string dram_budget_note;
    std::string gpu_budget_note;  // what the GPU budget is made of, where it is not the user's figure
    std::string infeasible_hint = "raise a budget (--gpu-budget, --dram-budget, --nvme-budget) or a capacity (--gpu-mem, "
                                  "--dram, --nvme-size), shorten the prompt, or lower --batch";
};

// What a plan may use when the user sets no budget: the GPU's memory less room for the CUDA
// context (max(512 MiB, 4%)), 90% of DRAM (the OS and page cache), 95% of the NVMe drive.
Budgets default_budgets(const HardwareProfile& hw);

struct SearchResult {
    Plan best;
    std::vector<Plan> candidates;  // the best plan of every feasible policy, best first
    int n_policies = 0;
    double seconds = 0;
};

// Throws OutOfBudget explaining what is missing when no policy fits.
SearchResult search_plans(const ModelShape& shape, const HardwareProfile& hw, const Workload& wl, const PlannerOptions& opts);
inline Plan make_plan(const ModelShape& shape, const HardwareProfile& hw, const Workload& wl, const PlannerOptions& opts) {
    return search_plans(shape, hw, wl, opts).best;
}
// A plan's identity, budgets, workload and policy, with no placements yet.
Plan plan_header(const ModelShape& shape, const HardwareProfile& hw, const Workload& wl, const Budgets& budgets,
                 const Policy& policy);
// Prices a given plan (e.g. loaded from JSON) on this hardware and workload.
Prediction evaluate_plan(const ModelShape& shape, const HardwareProfile& hw, const Workload& wl, const Plan& plan,
                         const RuntimeLimits& limits = {});
// How much faster than the CPU alone a device plan must be predicted to be chosen: a near tie
// is left to the CPU, since predictions stray by about this much (BENCHMARKS.md, the planner's
// choice at every --gpu-mem) and a device plan that loses is what must never happen.
inline constexpr double kDeviceWinMargin = 1.10;
// Whether a plan with a device is predicted to decode faster than the CPU alone's by that
// margin, or to decode no slower and finish the workload (its objective, prefill included) by
// that margin sooner: a device placement is chosen only then (never slower than the CPU alone).
bool device_beats_cpu(const Prediction& with_device, const Prediction& cpu_alone);
// Whether a device plan that does not beat the CPU alone loses only on decode: slower there, but
// its whole workload (a long prompt's prefill) sooner by the margin. The LP's best plan then
// traded decode for the first token; one searched again with its decode step bounded by the CPU
// alone's (PlannerOptions::max_decode_step_s) may beat the CPU alone on both.
bool trades_decode_for_prefill(const Prediction& with_device, const Prediction& cpu_alone);
// The plans no other plan beats on both per-sequence decode speed and aggregate throughput.
std::vector<Plan> frontier(const SearchResult& r);

// Why nothing fits: the first of — the tiers together are too small for the weights and the
// smallest KV cache; the GPU budget is below the working set; DRAM cannot stage NVMe reads.
std::string explain_infeasible(const ModelShape& shape, const HardwareProfile& hw, const Workload& wl, const PlannerOptions& opts);

}  // namespace strata::planner
