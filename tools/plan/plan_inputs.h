#pragma once
// What `strata plan` and `POST /v1/plan` share: the plan options (flags, or a request body)
// turned into the model shape, the hardware profile and the workload, and the policy search
// over them. Both print the chosen plan with Plan::to_json, so they answer alike.
#include "planner/hardware_profile.h"
#include "planner/model_shape.h"
#include "planner/policy_search.h"
#include "tools/cli_options.h"

namespace strata::cli {

struct PlanRun {
    planner::ModelShape shape;
    planner::HardwareProfile hw;
    planner::SearchResult result;
};

// Throws UsageError naming the bad option (an unknown catalog name, a share given for a
// capacity, ...) and OutOfBudget when no policy fits.
PlanRun run_planner(const PlanOptions& o);

}  // namespace strata::cli
