#include "planner/plan_report.h"

#include <algorithm>

#include <fmt/format.h>

#include "planner/cost_model.h"
#include "planner/expert_placement.h"
#include "planner/units.h"

namespace strata::planner {

namespace {

// Where a device plan's KV cache in DRAM is attended, and why: this plan's decode beside the
// same placement with the other side attending (the CPU overlapped with the device's matmuls,
// or the device with the KV copied in per layer), both priced alike (the run's `limits`), and
// whether the KV would fit on the device.
std::string attention_line(const Plan& plan, const ModelShape& shape, const HardwareProfile& hw, const RuntimeLimits& limits) {
    const bool kv_in_host = std::any_of(plan.layers.begin(), plan.layers.end(), [](const LayerPlacement& l) {
        return tier_of(l.kv) != Tier::Gpu && device_of(l.weights) == Device::Gpu;
    });
    if (!plan.has_gpu || !hw.has_gpu() || !kv_in_host || plan.experts.attention_on_gpu) return {};
    Plan other = plan;
    other.policy.cpu_attention = !plan.policy.cpu_attention;
    for (auto& l : other.layers) {
        // The CPU attending holds every layer's KV in host memory (CostModel::allowed).
        if (other.policy.cpu_attention && tier_of(l.kv) == Tier::Gpu) l.kv = KvOption::Dram;
        if (tier_of(l.kv) != Tier::Gpu) l.attention = other.policy.cpu_attention ? Device::Cpu : Device::Gpu;
    }
    const CostModel this_side(shape, hw, plan.workload, plan.policy, limits), other_side(shape, hw, plan.workload, other.policy, limits);
    const Prediction chosen = this_side.predict(plan), alt = other_side.predict(other);
    const bool overlapped = (plan.policy.cpu_attention ? this_side : other_side).attention_overlaps();
    const double kv = plan.workload.batch * double(plan.workload.kv_positions()) *
                      shape.kv_bytes_per_token(plan.policy.kv_type) * shape.n_layer;
    const double free = std::max(0.0, plan.budgets.gpu - plan.prediction.used.gpu);
    const auto side = [&](bool cpu, double tps) {
        if (!cpu) return fmt::format("the device attending, the KV copied in per layer: {:.3g} tok/s", tps);
        return fmt::format("the CPU attending{}: {:.3g} tok/s",
                           overlapped ? " beside the device's matmuls (two sub-batches)" : " (one sequence: not overlapped)", tps);
    };
    return fmt::format("attention {} (chosen); {}; the KV cache ({}) {} the GPU budget left beside the weights ({})",
                       side(plan.policy.cpu_attention, chosen.decode_tps_aggregate),
                       side(other.policy.cpu_attention, alt.decode_tps_aggregate), format_size(kv),
                       kv <= free ? "would fit" : "does not fit", format_size(free));
}

}  // namespace

std::vector<LayerRun> layer_runs(const Plan& plan) {
    std::vector<LayerRun> runs;
    for (const auto& l : plan.layers) {
        if (!runs.empty() && runs.back().weights == l.weights && runs.back().kv == l.kv && runs.back().attention == l.attention &&
            runs.back().last + 1 == l.layer)
            runs.back().last = l.layer;
        else
            runs.push_back({l.layer, l.layer, l.weights, l.kv, l.attention});
    }
    return runs;
}

namespace {

template <class... Args>
void append(std::string& s, fmt::format_string<Args...> f, Args&&... args) {
    s += fmt::format(f, std::forward<Args>(args)...);
    s += '\n';
}

std::string kv_text(KvOption o) {
    if (!is_recompute(o)) return std::string(tier_name(tier_of(o)));
    return fmt::format("{} (recompute)", tier_name(tier_of(o)));
}

std::string rate_line(const Prediction& p, const Plan& plan) {
    return fmt::format("TTFT {}; decode {:.3g} tok/s per sequence, {:.3g} tok/s for the batch of {}; overall {:.3g} tok/s "
                       "(prefill + {} tokens each)",
                       format_seconds(p.ttft_s), p.decode_tps_per_seq, p.decode_tps_aggregate, plan.policy.batch,
                       p.throughput_tps, plan.workload.gen_len);
}

}  // namespace

std::string plan_summary(const Plan& plan) {
    int gpu_layers = 0, dram_layers = 0, nvme_layers = 0;
    for (const auto& l : plan.layers) {
        const Tier t = tier_of(l.weights);
        (t == Tier::Gpu ? gpu_layers : t == Tier::Dram ? dram_layers : nvme_layers)++;
    }
    const std::string experts = plan.experts.enabled
        ? fmt::format(" ({} with routed experts offloaded: cache of {}, {:.0f}% hits expected, routing {})", nvme_layers,
                      plan.experts.cache_slots, 100 * plan.experts.hit_rate,
                      plan.experts.routing.substr(0, plan.experts.routing.find(' ')))
        : std::string();
    const std::string hybrid = !plan.experts.attention_on_gpu ? ""
        : plan.experts.has_device()
            ? fmt::format(", attention and {} routed experts on the GPU, the other experts on the CPU", plan.experts.n_device())
            : ", attention on the GPU and feed-forward on the CPU";
    return fmt::format("plan: {} layers on GPU / {} DRAM / {} NVMe{}{}, batch {}x{}, {} attention, {}; predicted TTFT {}, {:.3g} tok/s",
                       gpu_layers, dram_layers, nvme_layers, experts, hybrid, plan.policy.batch, plan.policy.n_micro,
                       plan.policy.cpu_attention ? "CPU" : "GPU", plan.policy.recompute ? "recompute" : "no recompute",
                       format_seconds(plan.prediction.ttft_s), plan.prediction.decode_tps_aggregate);
}

std::string format_plan(const Plan& plan, const ModelShape& shape, const HardwareProfile& hw, const SearchStats& stats,
                        const RuntimeLimits& limits) {
    const Prediction& p = plan.prediction;
    std::string s;
    ModelShape kv_shape = shape;
    kv_shape.kv_type = plan.policy.kv_type;
    append(s, "model     {} ({}, {} layers, {} of weights; KV {} = {} per token)", shape.name, dtype_name(shape.weight_type),
         shape.n_layer, format_size(static_cast<double>(shape.total_weight_bytes())), dtype_name(plan.policy.kv_type),
         format_size(kv_shape.kv_bytes_per_token() * shape.n_layer));
    append(s, "hardware  {}", hw.summary());
    append(s, "budgets   GPU {}, DRAM {}, NVMe {}", format_size(plan.budgets.gpu), format_size(plan.budgets.dram), format_size(plan.budgets.nvme));
    append(s, "workload  prompt {}, generate {}, {} sequence{}, objective {}", plan.workload.prompt_len, plan.workload.gen_len,
         plan.workload.batch, plan.workload.batch == 1 ? "" : "s", objective_name(plan.workload.objective));
    // A plan read from a file was not searched here.
    const std::string origin = stats.n_policies > 0
        ? fmt::format("best of {} policies, {}", stats.n_policies, format_seconds(stats.seconds)) : std::string("given");
    // The policy's CPU attention is the device's layers attending on the CPU (NEO's sub-batches);
    // a layer the CPU computes attends there whatever it says (the table's last column).
    const std::string cpu_attention =
        plan.has_gpu ? fmt::format(", CPU attention beside the device {}", plan.policy.cpu_attention ? "on" : "off") : "";
    append(s, "policy    {} sequence{} per pass in {} micro-batch{}{}, recompute {}, KV {} ({})", plan.policy.batch,
           plan.policy.batch == 1 ? "" : "s", plan.policy.n_micro, plan.policy.n_micro == 1 ? "" : "es", cpu_attention,
           plan.policy.recompute ? "on" : "off", dtype_name(plan.policy.kv_type), origin);
    append(s, "");
    append(s, "{:<11} {:<9} {:<8} {:<16} {:<9}", "layers", "weights", "matmuls", "KV cache", "attention");
    for (const auto& r : layer_runs(plan)) {
        const std::string range = r.first == r.last ? std::to_string(r.first) : fmt::format("{}-{}", r.first, r.last);
        append(s, "{:<11} {:<9} {:<8} {:<16} {:<9}", range, tier_name(tier_of(r.weights)), device_name(device_of(r.weights)),
             kv_text(r.kv), device_name(r.attention));
    }
    append(s, "{:<11} {:<9} {:<8}", "output", tier_name(tier_of(plan.output)), device_name(device_of(plan.output)));
    if (shape.embd_bytes > 0) append(s, "{:<11} {:<9} {:<8}", "embedding", tier_name(tier_of(plan.embedding)), "lookup");
    append(s, "{:<11} {:<9}", "hidden", plan.hidden == HiddenOption::Gpu ? "gpu" : "dram");
    append(s, "");
    // Layers at nvme(cpu) keep all but their routed experts in DRAM; where those are (and the
    // ones held on the device):
    if (plan.experts.enabled || plan.experts.has_device()) s += format_expert_plan(plan.experts, shape) + "\n";
    else if (plan.experts.attention_on_gpu) s += expert_line(plan.experts) + "\n\n";
    append(s, "{:<13} {:>12} {:>12}", "stream", "prefill", "decode step");
    for (int i = 0; i < kNumStreams; ++i)
        append(s, "{:<13} {:>12} {:>12}", stream_name(static_cast<Stream>(i)), format_seconds(p.prefill.stream_s[i]),
             format_seconds(p.decode.stream_s[i]));
    append(s, "{:<13} {:>12} {:>12}", "not overlapped", format_seconds(p.prefill.overhead_s), format_seconds(p.decode.overhead_s));
    append(s, "{:<13} {:>12} {:>12}", "pipelined", format_seconds(p.prefill.time_s), format_seconds(p.decode.time_s));
    append(s, "{:<13} {:>12} {:>12}", "bottleneck", stream_name(p.prefill.bottleneck), stream_name(p.decode.bottleneck));
    append(s, "");
    append(s, "predicted {}", rate_line(p, plan));
    if (const std::string a = attention_line(plan, shape, hw, limits); !a.empty()) append(s, "{}", a);
    append(s, "memory    GPU {} of {}, DRAM {} of {}, NVMe {} of {}", format_size(p.used.gpu), format_size(plan.budgets.gpu),
         format_size(p.used.dram), format_size(plan.budgets.dram), format_size(p.used.nvme), format_size(plan.budgets.nvme));
    if (plan.experts.enabled || plan.experts.attention_on_gpu) return s;  // not an LP's answer
    append(s, "LP        bound {} per token; rounded to whole layers {} (rounding loss {:.2f}%; the LP re-solved with "
              "whole-layer staging buffers: {})",
         format_seconds(plan.lp_bound_s), format_seconds(p.objective_s), 100 * plan.rounding_loss,
         format_seconds(plan.lp_objective_s));
    return s;
}

}  // namespace strata::planner
