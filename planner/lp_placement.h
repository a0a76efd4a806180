#pragma once
// The placement LP (GLPK). For one policy, continuous variables give the share of each group
// of identical consecutive layers whose weights take each WeightOption and whose KV takes each
// KvOption, plus the output layer's, the embedding's and the hidden states' placement. Every
// stream's busy time is linear in them (cost_model), so with T_prefill and T_decode bounded
// below by each stream (and by the GPU+CPU compute chain) the pipelined time per generated
// token, (T_prefill + (gen_len-1) T_decode) / tokens, is minimised exactly as FlexGen does.
// Capacity rows keep each tier within its budget, counting double-buffered staging space for
// whatever streams. A second solve, holding that optimum, minimises total stream time, so
// that ties go to the placement that uses the fastest memory (all-GPU when it all fits).
#include <array>
#include <optional>
#include <vector>

#include "planner/cost_model.h"
#include "planner/plan.h"

namespace strata::planner {

struct LayerGroup {
    int32_t first = 0, n = 0;
};
// Runs of consecutive layers with identical shapes: the LP's unit.
std::vector<LayerGroup> group_layers(const ModelShape& shape);

struct LpSolution {
    bool feasible = false;
    // Staging the chosen shares need once rounded to whole layers: the largest per-layer
    // buffer among the options in use (the LP itself only charges their shares of it).
    double gpu_staging_need = 0, dram_staging_need = 0;
    double gpu_staging = 0, dram_staging = 0;  // what the LP reserved
    double objective_s = 0;  // per generated token, as CostModel::objective_scale counts
    double prefill_s = 0, decode_s = 0;
    std::vector<GroupSolution> groups;
    std::array<double, kNumWeightOptions> output{}, embedding{};
    std::array<double, kNumHiddenOptions> hidden{};
};

// Restrictions that split the problem into cases. Whole layers either stream or not: a plan
// that streams any weights to the GPU needs at least one whole layer of staging there, one
// that keeps nothing on NVMe needs no DRAM staging. Solving each case with that known makes
// the minimum over cases a much tighter lower bound than the plain relaxation.
struct LpCase {
    bool weights_resident = false;  // every layer's (and the output's) weights stay on the GPU
    bool no_nvme = false;           // nothing lives on NVMe
    bool no_nvme_weights = false;   // no weights on NVMe (KV may be)
    double min_gpu_staging = 0;     // bytes reserved up front
    double min_dram_staging = 0;
    // The output layer, embedding table and hidden states are single units: rounding a
    // fractional answer for them can cost a lot, so the search fixes them and re-solves.
    std::optional<WeightOption> output, embedding;
    std::optional<HiddenOption> hidden;
    double max_decode_s = 0;  // a bound on the decode step (PlannerOptions::max_decode_step_s); 0: none
};

LpSolution solve_placement(const CostModel& cm, const Budgets& budgets, const std::vector<LayerGroup>& groups,
                           const LpCase& lp_case = {});

// The cases above for this model and policy: GPU weights resident or not, times NVMe unused,
// holding KV only, or holding weights.
std::vector<LpCase> lp_cases(const CostModel& cm, const std::vector<LayerGroup>& groups);

}  // namespace strata::planner
