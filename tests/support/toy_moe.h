#pragma once
// The toy model of tests/support/toy_shape.h as a mixture of experts, and its plan beside the
// toy device (toy_hardware.h), for the planner's and the placement's hand-computed tests.
#include <vector>

#include "planner/expert_placement.h"
#include "tests/support/toy_shape.h"

namespace strata::test {

// Per layer 4 experts of 240 MB (1.2e8 parameters, F16), 2 chosen a token, and 40 MB of other
// weights (2e7 parameters), all of them attention's.
inline planner::ModelShape toy_moe() {
    planner::ModelShape s = toy_shape();
    s.family = "qwen3moe";
    s.n_expert = 4, s.n_expert_used = 2;
    for (planner::LayerShape& l : s.layers) {
        l.weight_bytes = 1'000'000'000, l.expert_bytes = 960'000'000;
        l.n_matmul_params = 500'000'000, l.n_expert_params = 480'000'000, l.n_attn_params = 20'000'000;
    }
    return s;
}

// Its plan beside the toy device: every layer's attention and KV cache there, the experts on
// the host (none held by the device), layers 2 and 3's behind the expert cache (from NVMe) where
// `cached`; for `wl`.
inline planner::Plan toy_moe_plan(const planner::ModelShape& s, const planner::HardwareProfile& hw, bool cached,
                                  const planner::Workload& wl = {512, 128, 1, planner::Objective::Latency}) {
    using namespace planner;
    const std::vector<bool> offloaded = {false, false, cached, cached};
    const ExpertPlan x = place_experts(s, nullptr, "", 8, 240'000'000, offloaded);
    return with_attention_on_gpu(expert_offload_plan(s, hw, wl, Budgets{8e9, 8e9, 1e12}, DType::F16, x, offloaded), s, hw, true);
}

}  // namespace strata::test
