// Engine: device memory taken away mid-run (runtime/exec/device/device_memory_loss.cpp gives
// held experts and layers back between passes). What is predicted from then on is the run as it
// now runs; and when the device cannot hold even its own buffers, the run leaves it and goes on
// on the CPU alone, its KV cache copied into the host's, so that no request is lost to it.

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "planner/expert_placement.h"
#include "runtime/engine.h"
#include "runtime/exec/device/device_backend.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/place/placement.h"
#include "runtime/weights/weight_store.h"

namespace strata::runtime {

namespace {

// `l` on the CPU: its weights where the store holds them, its KV cache in DRAM.
void on_cpu(planner::LayerPlacement& l, const Residency& now) {
    l.weights = now.resident[l.layer] ? planner::WeightOption::DramCpu : planner::WeightOption::NvmeCpu;
    if (planner::tier_of(l.kv) == planner::Tier::Gpu) l.kv = planner::is_recompute(l.kv) ? planner::KvOption::ActDram : planner::KvOption::Dram;
    l.attention = planner::Device::Cpu;
}

}  // namespace

void Engine::reprice_if_given_back() {
    if (left_device_ || !backend_) return;  // priced on the CPU alone when it was let go
    try {
        const Backend::DeviceMemory m = backend_->device_memory();
        // Every loss stops op offload, and may move layers or give held experts back.
        if (m.losses == running_losses_) return;
        // The layers the device gave back run on the CPU from the weights the store now holds,
        // their KV cache in the host's, and the experts it gave back on the host's CPU; op
        // offload stopped.
        auto p = std::make_shared<Placement>(*placement_);
        if (m.experts_given_back > 0)
            p->plan = planner::with_held_experts(p->plan, p->shape, p->hw, p->routing ? &*p->routing : nullptr,
                                                 p->routing_note, backend_->device_experts());
        const Residency& now = weights_->residency();
        for (auto& l : p->plan.layers)
            if (now.cpu(l.layer) && planner::device_of(l.weights) == planner::Device::Gpu) on_cpu(l, now);
        if (p->op_offload_rows > 0) p->op_offload_rows = 0, p->op_offload_why = "stopped when device memory was lost";
        p->plan.experts.op_offload_rows = 0;
        running_losses_ = m.losses;  // priced once per loss, whether or not the price below is made
        p->plan.prediction = p->predict(p->plan.workload.prompt_len, p->plan.workload.gen_len, p->plan.workload.batch);
        std::lock_guard lock(running_mu_);
        running_ = std::move(p);
    } catch (const std::exception& e) {
        STRATA_LOG_WARN("plan: the run could not be priced again after device memory was lost: {}", e.what());
    }
}

void Engine::charge_kv_the_device_held() {
    const uint64_t uncharged = kv_->bytes() - kv_->layers_bytes(placement_->residency.on_cpu);
    kv_from_device_ = storage::Reservation::or_warn(*dram_, uncharged, "the KV cache the device held");
}

void Engine::leave_device(const std::string& why, const BatchStart& start) {
    auto& device = dynamic_cast<DeviceBackend&>(*backend_);
    device.hand_kv_to_host(*kv_);
    const bool kv_was_on_device = kv_on_ == KvPlacement::Device;
    Backend::DeviceMemory last = backend_->device_memory();
    last.used = last.budget = 0;
    last.expert_choices = start.device_expert_choices;
    last.offloaded_expert_choices = start.device_offloaded_choices;
    // Every layer's weights in DRAM first: when that fails, the device backend is still there.
    for (int il = 0; il < hp_.n_layer; ++il)
        if (weights_->residency().device(il)) weights_->run_on_cpu(il);
    use_cpu_backend();  // the device backend, and the device's memory, go
    cpu_->add_routing(start.routing);
    backend_->set_trace(trace_.get());
    left_device_ = last;
    STRATA_LOG_WARN("{}; the run goes on on the CPU alone, every layer there with its KV cache in DRAM", why);
    if (kv_was_on_device) charge_kv_the_device_held();
    // Priced as it now runs: every layer and the head on the CPU, no device, the KV cache where
    // the host's holds it.
    auto p = std::make_shared<Placement>(*placement_);
    const Residency& now = weights_->residency();
    for (auto& l : p->plan.layers) on_cpu(l, now);
    p->plan.has_gpu = false;
    p->plan.output = planner::WeightOption::DramCpu;
    p->plan.hidden = planner::HiddenOption::Dram;
    p->plan.policy.cpu_attention = true;  // as the CPU alone's plans say
    p->plan.experts.attention_on_gpu = false;
    p->plan.experts.device.clear();
    p->plan.experts.device_share.clear();
    p->plan.experts.device_bytes_per_token = 0;
    p->plan.experts.op_offload_rows = 0;
    p->hw.gpu.reset();
    p->hw_source = placement_->hw_source + ", without its GPU";
    p->op_offload_rows = 0;
    p->n_kv_layers_in_dram = hp_.n_layer - kv_->n_spilled();
    p->limits = run_limits(p->prefetch_depth, p->shape, p->plan.policy.kv_type, p->hw.nvme);
    try {
        p->plan.prediction = p->predict(p->plan.workload.prompt_len, p->plan.workload.gen_len, p->plan.workload.batch);
    } catch (const std::exception& e) {
        STRATA_LOG_WARN("plan: the run on the CPU alone could not be priced: {}", e.what());
    }
    std::lock_guard lock(running_mu_);
    running_ = std::move(p);
}

}  // namespace strata::runtime
