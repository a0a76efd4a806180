// Expert offload with a device, as llama.cpp's `-ngl 99 --override-tensor exps=CPU` and
// KTransformers run a mixture of experts: every layer's attention, its norms and the KV cache on
// the GPU (the output head too), each layer's feed-forward (router, shared and routed experts) on
// the CPU, its routed experts resident in DRAM or behind the DRAM expert cache on NVMe. Decode is
// priced per layer as the GPU's attention, the hidden state's hop down and back up, the CPU's
// feed-forward on the bytes a token reads, and the expected misses read from NVMe
// (CostModel::hybrid_layer). The GPU memory left beside attention may hold the most chosen
// experts too, computed there beside the CPU's share.
#include "planner/expert_placement.h"

#include <algorithm>

#include "core/log.h"

namespace strata::planner {

Plan with_attention_on_gpu(Plan p, const ModelShape& s, const HardwareProfile& hw, bool kv_on_gpu) {
    p.hardware = hw.summary();
    p.has_gpu = true;
    p.output = WeightOption::Gpu;
    p.hidden = HiddenOption::Gpu;
    // Latent attention has no CPU attention beside a device (the device runtime's).
    p.policy.cpu_attention = !kv_on_gpu && s.kv_latent == 0;
    for (LayerPlacement& l : p.layers) {
        l.kv = kv_on_gpu ? KvOption::Gpu : KvOption::Dram;
        l.attention = p.policy.cpu_attention ? Device::Cpu : Device::Gpu;
    }
    p.experts.attention_on_gpu = true;
    p.experts.kv_on_gpu = kv_on_gpu;
    p.experts.n_expert = s.n_expert;
    p.prediction = evaluate_plan(s, hw, p.workload, p);
    return p;
}

std::optional<Plan> attention_on_gpu_if_fits(const Plan& cpu_plan, const ModelShape& s, const HardwareProfile& hw) {
    for (bool kv_on_gpu : {true, false}) {
        Plan p = with_attention_on_gpu(cpu_plan, s, hw, kv_on_gpu);
        if (p.prediction.used.gpu <= p.budgets.gpu) return p;
    }
    return std::nullopt;
}

namespace {

// `p` with `want`'s experts on the GPU, the other experts where p put them; repriced.
Plan with_device_experts(const Plan& p, const ModelShape& s, const HardwareProfile& hw, const RoutingProfile* routing,
                         const std::string& routing_note, const DeviceExperts& want) {
    std::vector<bool> offloaded(static_cast<size_t>(s.n_layer), false);
    for (const LayerPlacement& l : p.layers)
        if (p.experts.enabled && l.weights == WeightOption::NvmeCpu) offloaded[static_cast<size_t>(l.layer)] = true;
    Plan with = p;
    with.experts = place_experts(s, routing, routing_note, p.experts.cache_slots, p.experts.slot_bytes, offloaded, want);
    with.experts.attention_on_gpu = true;
    with.experts.kv_on_gpu = p.experts.kv_on_gpu;  // where the plan put the KV cache
    with.prediction = evaluate_plan(s, hw, with.workload, with);
    return with;
}

}  // namespace

Plan with_held_experts(const Plan& p, const ModelShape& s, const HardwareProfile& hw, const RoutingProfile* routing,
                       const std::string& routing_note, std::vector<std::vector<int32_t>> held) {
    DeviceExperts want;
    want.held = std::move(held);
    want.held.resize(static_cast<size_t>(s.n_layer));
    return with_device_experts(p, s, hw, routing, routing_note, want);
}

Plan with_experts_on_gpu(const Plan& p, const ModelShape& s, const HardwareProfile& hw, const RoutingProfile* routing,
                         const std::string& routing_note, const DeviceExperts& want) {
    auto holding = [&](int32_t slots) {
        DeviceExperts w = want;
        w.slots = slots;
        return with_device_experts(p, s, hw, routing, routing_note, w);
    };
    // The layers the overrides give the device go there whatever the prediction; the most
    // chosen of the rest only when they make a token faster.
    const bool forced = std::find(want.layers.begin(), want.layers.end(), true) != want.layers.end();
    const Plan base = forced ? holding(0) : p;
    if (want.slots <= 0) return base;
    Plan more = holding(want.slots);
    if (more.prediction.objective_s < base.prediction.objective_s) return more;
    STRATA_LOG_INFO("experts: {} more on the GPU would not pay (the plan predicts {:.2f} ms a token with them, {:.2f} "
                    "without)", more.experts.n_device() - base.experts.n_device(), 1e3 * more.prediction.objective_s,
                    1e3 * base.prediction.objective_s);
    return base;
}

}  // namespace strata::planner
