#pragma once
// The hardware `strata plan` plans for: catalog parts (a dry run), a profile file (--hw) or
// this machine as `strata probe` measured it, with the capacities given overriding the
// profile's. `POST /v1/plan` takes catalog parts only (catalog_hardware in plan_inputs.h).
#include "planner/hardware_profile.h"
#include "tools/cli_options.h"

namespace strata::cli {

planner::HardwareProfile load_hardware(const PlanOptions& o);

}  // namespace strata::cli
