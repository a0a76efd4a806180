#include "planner/op_offload.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/kernel_shapes.h"
#include "planner/cost_model.h"

namespace strata::planner {

namespace {
constexpr int G = static_cast<int>(Stream::GpuCompute), C = static_cast<int>(Stream::CpuCompute),
              H = static_cast<int>(Stream::PcieH2D), D = static_cast<int>(Stream::PcieD2H), N = static_cast<int>(Stream::Nvme);

bool on_cpu(const LayerPlacement& l) { return device_of(l.weights) == Device::Cpu; }

// Beside a device that runs a mixture of experts' attention, a layer whose routed experts the
// host holds in DRAM (not read through the expert cache from the disk) and computes some of
// (the device not holding every one).
bool experts_in_dram(const ModelShape& shape, const Plan& plan, const LayerPlacement& l) {
    const auto il = static_cast<size_t>(l.layer);
    const bool all_held = il < plan.experts.device.size() && plan.experts.device[il].size() >= size_t(shape.n_expert);
    return l.weights == WeightOption::DramCpu && shape.layers.at(il).expert_bytes > 0 && !all_held;
}

// A layer's prefill one after the other: the device's share, the hops and the host's.
double serial_prefill_s(const Cost& c) { return c.prefill[G] + c.prefill[C] + c.prefill[H] + c.prefill[D] + c.prefill_overhead; }

// A mixture of experts beside a device: a long pass copies each layer whose experts are in DRAM
// in whole (rebuilt from the CPU's tiles), and the device computes every routed expert the
// pass chose there, the rows going up and coming back down as for the experts it holds; the
// router and the shared experts stay on the host, which waits for each fill of the device
// experts' scratch (CostModel::scratch_fills, device_experts). A layer's copy
// is made while the host waits for the device's experts of the layer before
// (runtime/exec/device/device_backend.cpp, run_schedule), at its first wait: for the first
// scratch's fill where there are more, else once the shared experts are done (the window priced
// past the host's whole work on the layer, the router and the attention's share too), whether
// that layer was copied in or holds its experts; the first layer's copy is made before anything.
OpOffloadPrice price_expert_op_offload(const ModelShape& shape, const Plan& plan, const CostModel& model, int32_t rows) {
    ExpertPlan on_device = plan.experts;
    on_device.device.resize(static_cast<size_t>(shape.n_layer));
    on_device.device_share.resize(static_cast<size_t>(shape.n_layer), 0.0);
    for (const LayerPlacement& l : plan.layers) {
        if (!experts_in_dram(shape, plan, l)) continue;
        std::vector<int32_t>& every = on_device.device[static_cast<size_t>(l.layer)];
        every.resize(static_cast<size_t>(shape.n_expert));
        for (int32_t e = 0; e < shape.n_expert; ++e) every[static_cast<size_t>(e)] = e;
        on_device.device_share[static_cast<size_t>(l.layer)] = 1.0;
    }
    OpOffloadPrice price;
    double window = 0;  // the device's experts of the layer before that the host waits out, copying
    for (const LayerPlacement& l : plan.layers) {
        const bool copied = experts_in_dram(shape, plan, l);
        const bool cached = plan.experts.enabled && l.weights == WeightOption::NvmeCpu;
        const Cost layer = model.hybrid_layer(l.layer, on_device, cached);
        if (copied) {
            price.cpu_s += serial_prefill_s(model.hybrid_layer(l.layer, plan.experts, false));
            const double copy = model.op_offload_copy_s(l.layer, WeightOption::DramCpu);
            price.device_s += std::max(0.0, copy - window) + serial_prefill_s(layer);
        }
        const double experts = model.device_experts(l.layer, on_device).prefill[G];
        const double fills = model.scratch_fills(double(rows) * shape.n_expert_used * on_device.device_share_of(l.layer));
        window = fills > 1 ? experts / fills : std::max(0.0, experts - layer.prefill[C]);
    }
    return price;
}
}  // namespace

std::vector<LayerSpan> op_offload_layer_runs(const ModelShape& shape, const Plan& plan) {
    std::vector<LayerSpan> runs;
    for (const LayerPlacement& l : plan.layers) {
        if (plan.experts.attention_on_gpu ? !experts_in_dram(shape, plan, l) : !on_cpu(l)) continue;
        if (!runs.empty() && runs.back().last + 1 == l.layer) runs.back().last = l.layer;
        else runs.push_back({l.layer, l.layer});
    }
    return runs;
}

std::string format_runs(std::span<const LayerSpan> runs) {
    std::string s;
    for (const LayerSpan& r : runs) {
        if (!s.empty()) s += ", ";
        s += r.first == r.last ? fmt::format("{}", r.first) : fmt::format("{}-{}", r.first, r.last);
    }
    return s;
}

OpOffloadPrice price_op_offload(const ModelShape& shape, const HardwareProfile& hw, const Plan& plan, int32_t rows,
                                int32_t before) {
    OpOffloadPrice price;
    if (!hw.has_gpu()) return price;
    Workload wl = plan.workload;
    wl.prompt_len = rows;
    wl.batch = 1;
    Policy one = plan.policy;
    one.batch = one.n_micro = 1;
    const CostModel model(shape, hw, wl, one);
    if (plan.experts.attention_on_gpu) return price_expert_op_offload(shape, plan, model, rows);
    const GpuProfile& gpu = *hw.gpu;
    // A layer's keys and values (latent attention's one row) go down into the host's cache
    // (decode reads it there), and the cache's rows the pass attends to come back up for the
    // device to attend over: its own rows and those of the passes before. Two hops, and their bytes.
    const double rows_down = shape.kv_latent > 0 ? 1.0 : 2.0;
    const double hops = rows * rows_down * shape.n_embd_kv() * 4 / (gpu.d2h_gbps * 1e9) +
                        (double(before) + rows) * shape.kv_bytes_per_token() / (gpu.h2d_gbps * 1e9) +
                        2 * gpu.handoff_us * 1e-6;
    double cpu_nvme = 0, dev_nvme = 0;
    bool first = true;
    const LayerPlacement* prev = nullptr;
    for (const LayerPlacement& l : plan.layers) {
        const bool follows_cpu_layer = prev && on_cpu(*prev);
        prev = &l;
        if (!on_cpu(l)) continue;
        const Cost cpu = model.layer_weights(l.layer, l.weights);
        // A run of CPU layers hops to the host and back once (CostModel::drop_hop).
        price.cpu_s += cpu.prefill[C] + cpu.prefill_overhead - (follows_cpu_layer ? gpu.handoff_us * 1e-6 : 0);
        cpu_nvme += cpu.prefill[N];
        const Cost dev = model.op_offloaded(l.layer, l.weights);
        // The host rebuilds a layer held in DRAM as the file lays it out, copying each matrix in
        // as it is ready (CostModel::op_offloaded), while the device computes the layer before.
        // The first copy has nothing of these layers' to overlap.
        const double copy = dev.prefill[H], compute = dev.prefill[G] + dev.prefill_overhead + hops;
        price.device_s += (first ? copy : 0) + std::max(first ? 0 : copy, compute);
        dev_nvme += dev.prefill[N];
        first = false;
    }
    price.cpu_s = std::max(price.cpu_s, cpu_nvme);
    price.device_s = std::max(price.device_s, dev_nvme);
    return price;
}

double op_offload_saving_s(const ModelShape& shape, const HardwareProfile& hw, const Plan& plan, int32_t prompt_len,
                           int32_t max_rows, int32_t min_rows) {
    if (min_rows <= 0 || max_rows <= 0) return 0;
    double saved = 0;
    for (int32_t left = prompt_len; left > 0; left -= max_rows) {
        const int32_t rows = std::min(left, max_rows);
        if (rows < min_rows) continue;
        const OpOffloadPrice p = price_op_offload(shape, hw, plan, rows, prompt_len - left);
        saved += p.cpu_s - p.device_s;  // negative where a forced row count makes it slower
    }
    return saved;
}

OpOffload choose_op_offload(const ModelShape& shape, const HardwareProfile& hw, const Plan& plan, int32_t max_rows) {
    OpOffload o;
    o.ttft_s = plan.prediction.ttft_s;
    if (!hw.has_gpu()) return o;
    o.runs = op_offload_layer_runs(shape, plan);
    if (o.runs.empty()) return o;
    // From the largest pass down, while the device stays ahead; a pass of up to kCpuGemvTokens
    // rows a sequence is decode to the runtime, which never offloads it.
    for (int32_t rows = max_rows; rows > kCpuGemvTokens; --rows) {
        const OpOffloadPrice p = price_op_offload(shape, hw, plan, rows);
        if (!(p.device_s < p.cpu_s)) break;
        o.min_rows = rows;
    }
    o.ttft_s -= op_offload_saving_s(shape, hw, plan, plan.workload.prompt_len, max_rows, o.min_rows);
    return o;
}

int32_t rows_if_slots_pay(const ModelShape& shape, const HardwareProfile& hw, const Plan& with, const Plan& without,
                          int32_t max_rows, const std::function<double(const Plan&)>& total_s) {
    const int32_t rows = choose_op_offload(shape, hw, with, max_rows).min_rows;
    if (rows <= 0) return 0;
    const double saved = op_offload_saving_s(shape, hw, with, with.workload.prompt_len, max_rows, rows);
    return total_s(with) - saved < total_s(without) ? rows : 0;
}

Prediction with_saving(Prediction p, double saved_s, const Workload& wl) {
    p.prefill.time_s -= saved_s;
    p.ttft_s -= saved_s;
    p.total_s -= saved_s;
    const double generated = double(wl.batch) * wl.gen_len;
    p.throughput_tps = generated / p.total_s;
    p.objective_s = p.total_s / (wl.objective == Objective::Throughput ? generated : wl.gen_len);
    return p;
}

}  // namespace strata::planner
