#pragma once
// Expert offload as the CPU runtime runs it: which layers' routed experts go through the
// expert cache, and the plan for it. A mixture of experts that does not fit the DRAM budget
// keeps every layer's attention, norms, router and shared experts resident and reads its
// routed experts through the cache (planner/expert_placement.h) instead of streaming whole
// layers; `--override-tensor` may put a layer's experts on NVMe (cached) or in DRAM (resident)
// whatever the budget.
#include <string>
#include <vector>

#include "planner/routing_profile.h"
#include "runtime/place/tensor_overrides.h"
#include "runtime/weights/residency.h"

namespace strata::runtime {

struct Placement;

// Per layer, whether its routed experts go through the cache; all false for a dense model, or
// when everything fits and no override asks for it.
std::vector<bool> offloaded_layers(const ResidencyInput& in, const OverrideRequest& overrides);

// Sets p.plan: the offloaded layers at nvme(cpu) with the largest expert cache the budget
// holds, the others at dram(cpu), priced by p.hw for `wl` with `routing` (null: uniform, `note`
// saying why).
void plan_expert_offload(Placement& p, const ResidencyInput& in, const planner::Workload& wl,
                         const std::vector<bool>& offloaded, const planner::RoutingProfile* routing, const std::string& note);

}  // namespace strata::runtime
