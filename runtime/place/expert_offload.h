#pragma once
// Expert offload as the CPU runtime runs it: which layers' routed experts go through the
// expert cache, and the plan for it. A mixture of experts that does not fit the DRAM budget
// keeps every layer's attention, norms, router and shared experts resident and reads its
// routed experts through the cache (planner/expert_placement.h) instead of streaming whole
// layers; `--override-tensor` may put a layer's experts on NVMe (cached) or in DRAM (resident)
// whatever the budget.
#include <cstdint>
#include <vector>

#include "planner/workload.h"
#include "runtime/place/op_offload_choice.h"
#include "runtime/place/tensor_overrides.h"
#include "runtime/weights/residency.h"

namespace strata::runtime {

struct Placement;

// Per layer, whether its routed experts go through the cache; all false for a dense model, or
// when everything fits and no override asks for it.
std::vector<bool> offloaded_layers(const ResidencyInput& in, const OverrideRequest& overrides);

// Sets p.plan: the offloaded layers at nvme(cpu) with the largest expert cache the budget
// holds, the others at dram(cpu), priced by p.hw for `wl` with p.routing (none: uniform,
// p.routing_note saying why).
void plan_expert_offload(Placement& p, const ResidencyInput& in, const planner::Workload& wl,
                         const std::vector<bool>& offloaded);

// With a device running every layer's attention (p.plan.experts.attention_on_gpu): the routed
// experts it holds as well. Every expert of the layers the overrides give the device, then the
// most chosen of the layers they do not keep on the host (by p.routing, else uniform) that
// `device_bytes` holds at `expert_bytes` each, when the plan predicts that faster. Sets p.plan.experts (repriced) and the expert cache's preload
// (p.residency). Throws OutOfBudget when the layers the overrides give the device do not fit.
void place_experts_on_device(Placement& p, const OverrideRequest& overrides,
                             uint64_t device_bytes, uint64_t expert_bytes);

// What the device leaves beside every layer's attention, the KV cache and activations.
struct DeviceRoom {
    uint64_t left = 0;          // bytes
    uint64_t slot_bytes = 0;    // op offload's two slots of the largest layer
    uint64_t expert_bytes = 0;  // one routed expert's
    bool experts_fit = false;   // the device's kernels run the experts
    uint64_t dram_left = UINT64_MAX;  // of the DRAM budget, beside what the plan holds
};
// Settles op offload as `mode` asks (op_offload_choice.h) and the routed experts the device
// holds in what is left: op offload's slots take their room first (where the device runs the
// experts and DRAM holds a rebuild buffer), and under `auto` are kept only where the plan with
// them (its prompt's passes faster, fewer experts held for decode, each priced) is predicted
// faster for its workload than the plan without, and, given `max_decode_step_s` (> 0: the plan
// searched again to decode no slower than the CPU alone), only where its decode step is within
// it. Throws OutOfBudget as place_experts_on_device does.
void place_beside_attention(Placement& p, const OverrideRequest& overrides, const OpOffloadMode& mode, int32_t max_rows,
                            const DeviceRoom& room, double max_decode_step_s = 0);

}  // namespace strata::runtime
