#pragma once
// `strata plan --ui`: the planner page and its endpoints without a model, on localhost by
// default. The page starts from the other flags given (model, hardware, workload, budgets);
// where they name no catalog part it plans for this machine, as `strata plan` does (--hw FILE,
// else the probed profile).
#include "tools/cli_options.h"

namespace strata::server {

// Serves until interrupted; throws IoError when the address cannot be bound and UsageError
// when the flags cannot make a plan request (naming the flag).
int run_plan_ui(const cli::PlanOptions& o);

}  // namespace strata::server
