// Expert offload with a device, as llama.cpp's `-ngl 99 --override-tensor exps=CPU` and
// KTransformers run a mixture of experts: every layer's attention, its norms and the KV cache on
// the GPU (the output head too), each layer's feed-forward (router, shared and routed experts) on
// the CPU, its routed experts resident in DRAM or behind the DRAM expert cache on NVMe. Decode is
// priced per layer as the GPU's attention, the hidden state's hop down and back up, the CPU's
// feed-forward on the bytes a token reads, and the expected misses read from NVMe
// (CostModel::hybrid_layer).
#include "planner/expert_placement.h"

namespace strata::planner {

Plan with_attention_on_gpu(Plan p, const ModelShape& s, const HardwareProfile& hw, bool kv_on_gpu) {
    p.hardware = hw.summary();
    p.has_gpu = true;
    p.output = WeightOption::Gpu;
    p.hidden = HiddenOption::Gpu;
    p.policy.cpu_attention = !kv_on_gpu;
    for (LayerPlacement& l : p.layers) {
        l.kv = kv_on_gpu ? KvOption::Gpu : KvOption::Dram;
        l.attention = kv_on_gpu ? Device::Gpu : Device::Cpu;
    }
    p.experts.attention_on_gpu = true;
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

}  // namespace strata::planner
