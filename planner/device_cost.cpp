// CostModel's terms for a device whose ops the probe measured (DeviceOps): a layer's launches
// beyond its work, what a captured graph saves a decode step, the one hop of the hidden
// states that a run of CPU layers beside the device makes, and a decode step as the device
// backend issues it; and the DRAM the device runtime holds apart from the plan's budget.
#include "planner/cost_model.h"

#include <algorithm>
#include <vector>

#include "planner/device_pipeline.h"

namespace strata::planner {

namespace {
constexpr int G = static_cast<int>(Stream::GpuCompute), C = static_cast<int>(Stream::CpuCompute),
              H = static_cast<int>(Stream::PcieH2D), D = static_cast<int>(Stream::PcieD2H);
}  // namespace

Cost CostModel::held_apart(Cost c, bool layer_weights) const {
    if (!limits_.dram_held_apart) return c;
    if (!layer_weights) c.bytes[static_cast<size_t>(Tier::Dram)] = 0;
    c.dram_staging = 0;  // the runtime's ring
    return c;
}

double CostModel::device_layer_launch_s(double op_us, bool decode) const {
    // Its matmul calls, each at the measured cost for its rows' width (q, k and v, the output, and
    // for a dense layer gate, up and down: a mixture of experts runs its feed-forward on the host;
    // in decode q, k and v are one launch and gate and up another where their weights share a type,
    // else a launch a type, as on n_embd-wide rows: Device::matmul_group), and its other ops, its
    // norms and SwiGLU going into the matmuls and its residual adds accumulated by them
    // (ModelShape::device_other_ops; with the host attending, attention is not the device's: priced
    // one op over).
    auto call = [&](double cols) { return dev_rate_->call_s(static_cast<double>(row_bytes(shape_.weight_type, static_cast<int64_t>(cols)))); };
    const double e = shape_.n_embd, q = double(shape_.n_head) * shape_.head_dim;
    double s = (decode ? 1 + shape_.mean_extra_decode_launches() : 3) * call(e) + call(q);
    if (shape_.n_expert == 0) s += (decode ? 1 : 2) * call(e) + call(shape_.n_ff);
    return s + shape_.device_other_ops() * op_us * 1e-6;
}

double CostModel::graph_saving_whole_s() const {
    const DeviceOps* o = ops();
    if (!dev_rate_ || o->graph_op_us <= 0 || o->graph_op_us >= o->op_overhead_us || shape_.n_expert > 0 || policy_.recompute)
        return 0;
    double ops = 0;
    for (const LayerShape& l : shape_.layers) ops += ModelShape::device_decode_ops(l);
    return m_ * ops * (o->op_overhead_us - o->graph_op_us) * 1e-6;
}

double CostModel::graph_saving_s(const Plan& plan) const {
    // A decode step held wholly on the device runs as one captured graph (DeviceBackend's
    // step_graph): every layer's weights and K/V there.
    for (const LayerPlacement& l : plan.layers)
        if (l.weights != WeightOption::Gpu || l.kv != KvOption::Gpu) return 0;
    return graph_saving_whole_s();
}

double CostModel::device_step_s(const Plan& plan) const {
    if (!has_gpu_ || limits_.device_slots <= 0 || attention_overlaps() || m_ != 1 || shape_.n_expert > 0) return 0;
    using Site = DeviceLayerWork::Site;
    // The norm and q, k, v of a layer's matmuls come before its attention.
    const double e = shape_.n_embd, q = double(shape_.n_head) * shape_.head_dim, kv = shape_.n_embd_kv();
    const double before = (q + 2 * kv) * e / ((q + 2 * kv) * e + q * e + 3 * e * shape_.n_ff);
    // The device backend holds the KV cache wholly on the device or wholly in the host's DRAM
    // (runtime/place/gpu_placement.cpp): a plan with some layers' KV off the device runs with
    // all of it there, K and V (none recomputed), attended where the policy says.
    const bool kv_on_device =
        std::all_of(plan.layers.begin(), plan.layers.end(), [](const LayerPlacement& l) { return tier_of(l.kv) == Tier::Gpu; });
    // A hop as measured, else (a catalog GPU) the CPU's per-layer hand-off, as CPU attention's.
    const double hop = hop_s_ > 0 ? hop_s_ : cpu_sync_s_;
    std::vector<DeviceLayerWork> work;
    const LayerPlacement* prev = nullptr;
    for (const LayerPlacement& l : plan.layers) {
        const Cost weights = placed_weights(plan, l);
        DeviceLayerWork w;
        if (device_of(l.weights) == Device::Cpu) {
            const Cost c = placed_layer(plan, l);
            w.site = Site::Cpu;
            // Its hop in place of the one priced with it; a run of CPU layers hops once (drop_hop).
            w.compute_s = c.decode[C] + c.decode_overhead - hop_s_ + (prev && on_cpu_beside_device(*prev) ? 0 : hop);
        } else {
            w.site = l.weights == WeightOption::Gpu ? Site::Device : Site::CopiedIn;
            if (w.site == Site::CopiedIn) w.copy_s = weights.decode[H], w.host_waits_copy = tier_of(l.weights) == Tier::Nvme;
            const KvOption at = kv_on_device ? l.kv : tier_of(l.kv) == Tier::Nvme ? KvOption::Nvme : KvOption::Dram;
            const Cost c = kv_cost(at, attention_device(at), !kv_on_device);
            // With the device attending, the KV's own overhead is its recompute's ops.
            w.compute_s = weights.decode[G] + weights.decode_overhead + c.decode[G] +
                          (attention_device(at) == Device::Gpu ? c.decode_overhead : 0);
            w.round_trip = !kv_on_device;
            w.before_attention = before;
            w.host_s = c.decode[C];
            w.kv_copy_s = attention_device(at) == Device::Gpu ? c.decode[H] : 0;
        }
        work.push_back(w);
        prev = &l;
    }
    Cost tail = fixed();
    tail += output(plan.output);
    if (shape_.embd_bytes > 0) tail += embedding(plan.embedding);
    tail += hidden(plan.hidden);
    const double tail_s = tail.decode[G] + tail.decode[C] + tail.decode[D] + tail.decode_overhead - graph_saving_s(plan);
    return device_pipeline_s(work, limits_.device_slots, hop, tail_s);
}

bool CostModel::on_cpu_beside_device(const LayerPlacement& l) const {
    return has_gpu_ && !policy_.cpu_attention && device_of(l.weights) == Device::Cpu;
}

Cost CostModel::run_weights(int layer, int n, WeightOption o) const {
    const Cost one = layer_weights(layer, o);
    Cost run = one.scaled(n);
    if (has_gpu_ && !policy_.cpu_attention && device_of(o) == Device::Cpu)
        for (int i = 1; i < n; ++i) drop_hop(run, one.prefill[C] > 0);
    return run;
}

void CostModel::drop_hop(Cost& total, bool prefill) const {
    // The runtime takes a run of CPU layers' hidden states down once and back once
    // (DeviceBackend's layers_on_cpu): a layer after another CPU layer makes no hop of its own.
    const double hop_d = rows_d_ * shape_.n_embd * 4.0, hop_p = B_ * P_ * shape_.n_embd * 4.0;
    total.decode[H] -= hop_d / h2d_, total.decode[D] -= hop_d / d2h_;
    total.decode_overhead -= m_ * hop_s_;
    if (!prefill) return;
    total.prefill[H] -= hop_p / h2d_, total.prefill[D] -= hop_p / d2h_;
    total.prefill_overhead -= passes_ * hop_s_;
}

}  // namespace strata::planner
