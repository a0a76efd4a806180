#include "runtime/place/expert_offload.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/bytes.h"
#include "core/error.h"
#include "core/log.h"

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
        // Experts given to the device whole stay where the budget puts the rest.
        out[il] = asked && *asked != planner::Tier::Gpu ? *asked == planner::Tier::Nvme : !fits;
    }
    return out;
}

void plan_expert_offload(Placement& p, const ResidencyInput& in, const planner::Workload& wl,
                         const std::vector<bool>& offloaded) {
    const int slots = expert_cache_slots(in, offloaded);
    const planner::ExpertPlan x = planner::place_experts(p.shape, p.routing ? &*p.routing : nullptr, p.routing_note, slots,
                                                         in.expert_slot_bytes, offloaded);
    planner::Budgets b = planner::default_budgets(p.hw);
    if (in.budget) b.dram = static_cast<double>(in.budget);
    p.plan = planner::expert_offload_plan(p.shape, p.hw, wl, b, p.shape.kv_type, x, offloaded);
    p.plan.model_weight_bytes = p.shape.total_weight_bytes();
}

void place_experts_on_device(Placement& p, const OverrideRequest& overrides,
                             uint64_t device_bytes, uint64_t expert_bytes) {
    const int n_layer = p.shape.n_layer;
    planner::DeviceExperts want;
    want.layers.assign(static_cast<size_t>(n_layer), false);
    want.host_only.assign(static_cast<size_t>(n_layer), false);
    int n_whole = 0;
    for (int il = 0; il < n_layer && static_cast<size_t>(il) < overrides.experts.size(); ++il) {
        if (!overrides.experts[il]) continue;
        if (*overrides.experts[il] == planner::Tier::Gpu) want.layers[il] = true, ++n_whole;
        else want.host_only[il] = true;
    }
    const uint64_t whole_bytes = uint64_t(n_whole) * uint64_t(p.shape.n_expert) * expert_bytes;
    if (whole_bytes > device_bytes)
        throw OutOfBudget(fmt::format("--override-tensor gives the device every expert of {} layers ({}), but {} of its "
                                      "memory is left beside the attention weights, the KV cache and activations",
                                      n_whole, format_bytes(whole_bytes), format_bytes(device_bytes)),
                          "give more with --gpu-mem, or fewer layers' experts to the device");
    want.slots = expert_bytes ? static_cast<int32_t>((device_bytes - whole_bytes) / expert_bytes) : 0;
    p.plan = planner::with_experts_on_gpu(p.plan, p.shape, p.hw, p.routing ? &*p.routing : nullptr, p.routing_note, want);
    p.residency.experts.preload = p.plan.experts.dram;
}

}  // namespace strata::runtime
