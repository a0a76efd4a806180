#include "runtime/place/expert_offload.h"

#include <algorithm>

#include "planner/expert_placement.h"
#include "runtime/place/placement.h"

namespace strata::runtime {

std::vector<bool> offloaded_layers(const ResidencyInput& in, const OverrideRequest& overrides) {
    const size_t n = in.layer_bytes.size();
    std::vector<bool> out(n, false);
    if (in.n_expert == 0) return out;
    uint64_t all = in.fixed_bytes + in.other_bytes;
    for (uint64_t b : in.layer_bytes) all += b;
    const bool fits = in.budget == 0 || all <= in.budget;
    for (size_t il = 0; il < n; ++il) {
        const auto& asked = il < overrides.experts.size() ? overrides.experts[il] : std::nullopt;
        out[il] = asked ? *asked == planner::Tier::Nvme : !fits;
    }
    return out;
}

void plan_expert_offload(Placement& p, const ResidencyInput& in, const planner::Workload& wl,
                         const std::vector<bool>& offloaded, const planner::RoutingProfile* routing, const std::string& note) {
    const int slots = expert_cache_slots(in, offloaded);
    const planner::ExpertPlan x = planner::place_experts(p.shape, routing, note, slots, in.expert_slot_bytes, offloaded);
    planner::Budgets b = planner::default_budgets(p.hw);
    if (in.budget) b.dram = static_cast<double>(in.budget);
    p.plan = planner::expert_offload_plan(p.shape, p.hw, wl, b, p.shape.kv_type, x, offloaded);
    p.plan.model_weight_bytes = p.shape.total_weight_bytes();
}

}  // namespace strata::runtime
