// CostModel::offloaded_layer: a mixture-of-experts layer whose routed experts live on NVMe
// with a DRAM cache (expert_placement.h). Its other tensors are priced as resident weights
// the CPU reads in place; its experts as weights of which a pass reads the chosen share (the
// active bytes, ModelShape::read_bytes), and of those the expected misses also cross NVMe and
// land in DRAM first. The layer's share of the cache is what it keeps in DRAM. The reads start
// when the layer's router has chosen and the layer's output needs every chosen expert, so
// they overlap only the compute of the experts already held: the CPU waits out the rest.
// CostModel::hybrid_layer: the same layer with its attention on the GPU (ExpertPlan::attention_on_gpu)
// and the most chosen experts, where the plan holds some there (ExpertPlan::device), computed
// on the GPU beside the CPU's share.
#include "planner/cost_model.h"

#include <algorithm>
#include <cmath>

#include "core/kernel_shapes.h"

namespace strata::planner {

namespace {
// The expected misses of a pass's chosen experts (`decode`, `prefill` bytes per micro-batch)
// cross NVMe and land in DRAM first; the CPU (whose time in `e` is the layer's feed-forward)
// waits for them beyond the held experts' share of that time.
// `decode` and `prefill` bytes of chosen experts read by each of `m` micro-batches' decode steps
// and each of `passes` prompt passes.
void add_misses(Cost& e, const ExpertPlan& x, double decode, double prefill, double m, double passes, double nvme_r,
                double dram_bw) {
    constexpr int N = static_cast<int>(Stream::Nvme), R = static_cast<int>(Stream::Dram), C = static_cast<int>(Stream::CpuCompute);
    const double miss = 1.0 - x.hit_rate;
    auto misses = [&](std::array<double, kNumStreams>& t, double bytes, double times) {
        const double read = times * miss * bytes / nvme_r;
        t[C] += std::max(0.0, read - x.hit_rate * t[C]);
        t[N] += read;
        t[R] += times * miss * bytes / dram_bw;
    };
    misses(e.decode, decode, m);
    misses(e.prefill, prefill, passes);
}
}  // namespace

Cost CostModel::offloaded_layer(int layer, const ExpertPlan& x) const {
    constexpr int kDram = 1, kNvme = 2;  // Cost::bytes by tier: GPU, DRAM, NVMe
    const LayerShape& l = shape_.layers.at(static_cast<size_t>(layer));
    const double dense = static_cast<double>(l.weight_bytes - l.expert_bytes);
    const double dense_params = static_cast<double>(l.n_matmul_params - l.n_expert_params);
    Cost c = weights_cost({dense, dense, dense, dense_params}, rows_d_, B_ * P_, WeightOption::DramCpu, true);
    const double stored = static_cast<double>(l.expert_bytes);
    const double decode = shape_.read_bytes(l, rows_d_ / m_) - dense, prefill = shape_.read_bytes(l, pass_rows_) - dense;
    Cost e = weights_cost({stored, decode, prefill, shape_.active_matmul_params(l) - dense_params}, rows_d_, B_ * P_,
                          WeightOption::DramCpu, false);
    e.bytes[kDram] = static_cast<double>(x.cache_slots) * static_cast<double>(x.slot_bytes) / shape_.n_layer;
    e.bytes[kNvme] = stored;
    // Every micro-batch reads its chosen experts; the ones not held come from NVMe.
    add_misses(e, x, decode, prefill, m_, passes_, file_r_, dram_bw_);
    c += e;
    return c;
}

Cost CostModel::hybrid_layer(int layer, const ExpertPlan& x, bool offloaded) const {
    constexpr int kDram = 1, kNvme = 2;
    constexpr int G = static_cast<int>(Stream::GpuCompute), C = static_cast<int>(Stream::CpuCompute);
    const LayerShape& l = shape_.layers.at(static_cast<size_t>(layer));
    const double dense = static_cast<double>(l.weight_bytes - l.expert_bytes);
    const double dense_params = static_cast<double>(l.n_matmul_params - l.n_expert_params);
    // Attention's matrices of the layer's dense parameters (as counted, else q, k, v, o by the
    // heads); its bytes in proportion.
    const double attn_params = l.n_attn_params > 0 ? static_cast<double>(l.n_attn_params)
                                                   : double(shape_.n_embd) * 2.0 * (double(shape_.n_head) * shape_.head_dim + shape_.n_embd_kv());
    const double attn = dense_params > 0 ? dense * std::min(1.0, attn_params / dense_params) : dense;
    Cost c = weights_cost({attn, attn, attn, attn_params}, rows_d_, B_ * P_, WeightOption::Gpu, true);
    // The feed-forward on the CPU, prompts too (a CPU-only plan's pricing): norm, router and
    // shared experts read whole, the routed experts' chosen share less the device's; and the
    // hidden states' hop down and back up around it.
    const double ffn = dense - attn, stored = static_cast<double>(l.expert_bytes);
    const double decode = shape_.read_bytes(l, rows_d_ / m_) - dense, prefill = shape_.read_bytes(l, pass_rows_) - dense;
    const double routed_params = shape_.active_matmul_params(l) - dense_params;
    const double on_dev = x.device_share_of(layer), on_host = 1 - on_dev;
    CostModel on_cpu(*this);
    on_cpu.has_gpu_ = false;
    Cost f = on_cpu.weights_cost({ffn + stored, ffn + on_host * decode, ffn + on_host * prefill,
                                  dense_params - attn_params + on_host * routed_params},
                                 rows_d_, B_ * P_, WeightOption::DramCpu, true);
    const double hop = 4.0 * shape_.n_embd;  // one token's hidden state, f32
    f.decode[static_cast<int>(Stream::PcieD2H)] += rows_d_ * hop / d2h_;
    f.decode[static_cast<int>(Stream::PcieH2D)] += rows_d_ * hop / h2d_;
    f.prefill[static_cast<int>(Stream::PcieD2H)] += B_ * P_ * hop / d2h_;
    f.prefill[static_cast<int>(Stream::PcieH2D)] += B_ * P_ * hop / h2d_;
    // The host waits for the copy down once per layer and micro-batch, as around CPU attention.
    f.decode_overhead += m_ * cpu_sync_s_;
    f.prefill_overhead += passes_ * cpu_sync_s_;
    if (offloaded) {
        f.bytes[kDram] = ffn + static_cast<double>(x.cache_slots) * static_cast<double>(x.slot_bytes) / shape_.n_layer;
        f.bytes[kNvme] = stored;
        add_misses(f, x, on_host * decode, on_host * prefill, m_, passes_, file_r_, dram_bw_);
    }
    if (static_cast<size_t>(layer) < x.device.size() && !x.device[layer].empty()) {
        // The device's experts run while the CPU runs its own share of the layer's feed-forward
        // and the shared experts, which start after the host has queued the last scratch's worth
        // of the device's rows (scratch_fills): they overlap that last fill only, the whole of
        // them where a pass's choices fit the scratch. The router chose them before: its
        // matmul is host work they do not overlap.
        Cost d = device_experts(layer, x);
        const double router = static_cast<double>(l.router_bytes);
        const Cost r = on_cpu.weights_cost({router, router, router, double(shape_.n_embd) * shape_.n_expert}, rows_d_, B_ * P_,
                                           WeightOption::DramCpu, false);
        const double k = shape_.n_expert_used * on_dev;
        d.decode[G] -= std::min(std::max(0.0, f.decode[C] - r.decode[C]), d.decode[G] / scratch_fills(k * rows_d_ / m_));
        d.prefill[G] -= std::min(std::max(0.0, f.prefill[C] - r.prefill[C]), d.prefill[G] / scratch_fills(k * pass_rows_));
        f += d;
    }
    c += f;
    return c;
}

double CostModel::scratch_fills(double device_rows) const {
    const auto rows = device_expert_rows(static_cast<int64_t>(ModelShape::kPassRows), shape_.n_expert_used);
    return std::max(1.0, std::ceil(device_rows / static_cast<double>(rows)));
}

Cost CostModel::device_experts(int layer, const ExpertPlan& x) const {
    constexpr int kGpu = 0;
    const LayerShape& l = shape_.layers.at(static_cast<size_t>(layer));
    const double dense = static_cast<double>(l.weight_bytes - l.expert_bytes);
    const double dense_params = static_cast<double>(l.n_matmul_params - l.n_expert_params);
    const double stored = static_cast<double>(l.expert_bytes);
    const double decode = shape_.read_bytes(l, rows_d_ / m_) - dense, prefill = shape_.read_bytes(l, pass_rows_) - dense;
    const double routed_params = shape_.active_matmul_params(l) - dense_params;
    const double on_dev = x.device_share_of(layer);
    const double n_dev = static_cast<double>(static_cast<size_t>(layer) < x.device.size() ? x.device[layer].size() : 0);
    if (n_dev <= 0) return {};
    const double dev_stored = shape_.n_expert ? stored * n_dev / shape_.n_expert : 0;
    // Their rows go up and come back down (n_expert_used of a token's rows at the device's
    // share); the host waits for them once for each fill of their scratch.
    Cost d = weights_cost({dev_stored, on_dev * decode, on_dev * prefill, on_dev * routed_params}, rows_d_, B_ * P_,
                          WeightOption::Gpu, false);
    const double rows = shape_.n_expert_used * on_dev, hop = 4.0 * shape_.n_embd;
    d.decode[static_cast<int>(Stream::PcieH2D)] += rows_d_ * rows * hop / h2d_;
    d.decode[static_cast<int>(Stream::PcieD2H)] += rows_d_ * rows * hop / d2h_;
    d.prefill[static_cast<int>(Stream::PcieH2D)] += B_ * P_ * rows * hop / h2d_;
    d.prefill[static_cast<int>(Stream::PcieD2H)] += B_ * P_ * rows * hop / d2h_;
    const double wait = hop_s_ > 0 ? hop_s_ : cpu_sync_s_;
    d.decode_overhead += m_ * scratch_fills(rows * rows_d_ / m_) * wait;
    d.prefill_overhead += passes_ * scratch_fills(rows * pass_rows_) * wait;
    // The host issues each held expert's ops that a pass chose, and its rows' copy up and
    // down; of t tokens, each chooses a held expert with n_expert_used × on_dev / n_dev. A
    // prompt runs in passes of ModelShape::kPassRows rows, an expert's gate and up launched
    // apart on its many rows (an op more). Not counted: a decode pass giving one expert more
    // than 16 rows, which it launches 16 at a time.
    if (const DeviceOps* o = ops()) {
        const double per_expert = (l.device_expert_ops + 2) * o->op_overhead_us * 1e-6;
        const double p = std::min(1.0, shape_.n_expert_used * on_dev / n_dev);
        auto chosen = [&](double t) { return n_dev * (1.0 - std::pow(1.0 - p, std::max(1.0, t))); };
        d.decode_overhead += m_ * chosen(rows_d_ / m_) * per_expert;
        d.prefill_overhead += passes_ * chosen(pass_rows_) * (per_expert + o->op_overhead_us * 1e-6);
    }
    d.bytes[kGpu] = dev_stored;
    return d;
}

Cost CostModel::placed_weights(const Plan& plan, const LayerPlacement& l) const {
    const bool offloaded = plan.experts.enabled && l.weights == WeightOption::NvmeCpu;
    if (plan.experts.attention_on_gpu) return hybrid_layer(l.layer, plan.experts, offloaded);
    if (offloaded) return offloaded_layer(l.layer, plan.experts);
    return layer_weights(l.layer, l.weights);
}

}  // namespace strata::planner
