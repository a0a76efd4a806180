// CostModel::offloaded_layer: a mixture-of-experts layer whose routed experts live on NVMe
// with a DRAM cache (expert_placement.h). Its other tensors are priced as resident weights
// the CPU reads in place; its experts as weights of which a pass reads the chosen share (the
// active bytes, ModelShape::read_bytes), and of those the expected misses also cross NVMe and
// land in DRAM first. The layer's share of the cache is what it keeps in DRAM. The reads start
// when the layer's router has chosen and the layer's output needs every chosen expert, so
// they overlap only the compute of the experts already held: the CPU waits out the rest.
#include "planner/cost_model.h"

namespace strata::planner {

Cost CostModel::offloaded_layer(int layer, const ExpertPlan& x) const {
    constexpr int N = static_cast<int>(Stream::Nvme), R = static_cast<int>(Stream::Dram);
    constexpr int kDram = 1, kNvme = 2;  // Cost::bytes by tier: GPU, DRAM, NVMe
    const LayerShape& l = shape_.layers.at(static_cast<size_t>(layer));
    const double dense = static_cast<double>(l.weight_bytes - l.expert_bytes);
    const double dense_params = static_cast<double>(l.n_matmul_params - l.n_expert_params);
    Cost c = weights_cost({dense, dense, dense, dense_params}, B_, B_ * P_, WeightOption::DramCpu, true);
    const double stored = static_cast<double>(l.expert_bytes);
    const double decode = shape_.read_bytes(l, B_ / m_) - dense, prefill = shape_.read_bytes(l, B_ * P_ / m_) - dense;
    Cost e = weights_cost({stored, decode, prefill, shape_.active_matmul_params(l) - dense_params}, B_, B_ * P_,
                          WeightOption::DramCpu, false);
    e.bytes[kDram] = static_cast<double>(x.cache_slots) * static_cast<double>(x.slot_bytes) / shape_.n_layer;
    e.bytes[kNvme] = stored;
    // Every micro-batch reads its chosen experts; the ones not held come from NVMe.
    const double miss = 1.0 - x.hit_rate;
    constexpr int C = static_cast<int>(Stream::CpuCompute);
    auto misses = [&](std::array<double, kNumStreams>& t, double bytes) {
        const double read = m_ * miss * bytes / nvme_r_;
        t[C] += std::max(0.0, read - x.hit_rate * t[C]);
        t[N] += read;
        t[R] += m_ * miss * bytes / dram_bw_;
    };
    misses(e.decode, decode);
    misses(e.prefill, prefill);
    c += e;
    return c;
}

Cost CostModel::placed_weights(const Plan& plan, const LayerPlacement& l) const {
    if (plan.experts.enabled && l.weights == WeightOption::NvmeCpu) return offloaded_layer(l.layer, plan.experts);
    return layer_weights(l.layer, l.weights);
}

}  // namespace strata::planner
