#pragma once
// From the LP's shares to whole layers: each group's layers take each option in proportion
// (largest remainder), then a greedy repair moves single layers to slower tiers while a tier
// is over budget (staging buffers become whole layers, so rounding can overflow), and a
// greedy pass moves layers back up while that fits and helps. The rounded plan is then
// priced by the same cost model; its excess over the LP optimum is the rounding loss.
#include "planner/cost_model.h"
#include "planner/lp_placement.h"
#include "planner/plan.h"

namespace strata::planner {

// Fills plan.layers / output / embedding / hidden / prediction. Returns false when no
// sequence of moves makes the plan fit the budgets. With `max_decode_s` (LpCase's bound), the
// plan is moved within it first, and the improving moves keep it there (false where none does).
bool round_plan(const CostModel& cm, const Budgets& budgets, const LpSolution& sol, Plan& plan, double max_decode_s = 0);

// True when `used` fits `budgets` (with a hair of slack for floating point).
bool fits(const MemoryUse& used, const Budgets& budgets);

}  // namespace strata::planner
