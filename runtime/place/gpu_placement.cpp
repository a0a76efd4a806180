#include "runtime/place/gpu_placement.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "gpu/cuda_devices.h"
#include "gpu/cuda_kernels.h"
#include "models/gguf_file.h"
#include "planner/policy_search.h"
#include "probe/probe.h"
#include "runtime/weights/model_weights.h"
#include "storage/budget.h"

namespace strata::runtime {

using planner::WeightOption;

std::optional<AttentionChoice> parse_attention(std::string_view s) {
    if (s == "auto") return AttentionChoice::Auto;
    if (s == "cpu") return AttentionChoice::Cpu;
    if (s == "gpu") return AttentionChoice::Gpu;
    return std::nullopt;
}

namespace {

// Why the CUDA backend cannot run this architecture, or empty: it runs the llama block alone.
std::string unsupported_arch(const models::Hparams& hp) {
    using models::Arch;
    if (hp.arch != Arch::Llama && hp.arch != Arch::Mistral && hp.arch != Arch::Qwen2)
        return fmt::format("the CUDA backend runs llama, mistral and qwen2 models; this one is {}", models::arch_name(hp.arch));
    if (hp.moe.enabled())
        return fmt::format("the CUDA backend has no mixture-of-experts layers; this model has {} experts", hp.moe.n_expert);
    return {};
}

// Why the kernels cannot run this model, or empty.
std::string unsupported_types(const models::GgufFile& file, const models::Hparams& hp, DType kv_type, AttentionChoice attention) {
    const ModelWeights w = ModelWeights::bind(file, hp);
    if (!gpu::gpu_weight_type(w.output.type)) return fmt::format("the output head is {}", dtype_name(w.output.type));
    for (size_t il = 0; il < w.layers.size(); ++il) {
        const LayerWeights& l = w.layers[il];
        for (const WeightRef* r : {&l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_gate, &l.ffn_up, &l.ffn_down})
            if (!gpu::gpu_weight_type(r->type)) return fmt::format("layer {} has {} weights", il, dtype_name(r->type));
    }
    if (attention != AttentionChoice::Cpu && !gpu::gpu_kv_type(kv_type))
        return fmt::format("the GPU attention kernels do not read a {} KV cache (use --attention cpu)", dtype_name(kv_type));
    return {};
}

// The cached probe when it saw this GPU, else the GPU from the driver and the catalog.
planner::HardwareProfile gpu_profile() {
    std::string source;
    planner::HardwareProfile hw;
    if (auto cached = probe::load_cached_profile(); cached && cached->has_gpu()) return *cached;
    hw = runtime_profile(source);  // the CPU side, without a GPU
    probe::probe_gpu(hw, false);  // starting never measures
    return hw;
}

}  // namespace

GpuTarget find_gpu(const GpuRequest& req, const models::GgufFile& file, const models::Hparams& hp, DType kv_type) {
    GpuTarget t;
    if (req.gpu_mem && *req.gpu_mem == 0) {
        t.why_not = "--gpu-mem 0";
        return t;
    }
    if (std::string why = unsupported_arch(hp); !why.empty()) {
        t.why_not = why;
        return t;
    }
    const gpu::DeviceList devices = gpu::list_devices();
    if (devices.devices.empty()) {
        t.why_not = devices.why_none;
        return t;
    }
    const gpu::DeviceInfo& d = devices.devices.front();
    if (d.sm_major < 8) {
        t.why_not = fmt::format("{} is compute capability {}.{}; the kernels are built for 8.0 and 9.0", d.name, d.sm_major, d.sm_minor);
        return t;
    }
    if (std::string why = unsupported_types(file, hp, kv_type, req.attention); !why.empty()) {
        t.why_not = "the GPU kernels cannot run this model: " + why;
        return t;
    }
    t.hw = gpu_profile();
    const uint64_t budget = req.gpu_mem ? *req.gpu_mem : static_cast<uint64_t>(planner::default_budgets(t.hw).gpu);
    if (budget > d.total_bytes)
        throw UsageError(fmt::format("--gpu-mem {} is more than {}'s {}", format_bytes(budget), d.name,
                                     format_bytes(d.total_bytes)),
                         "give at most what the device has, or leave --gpu-mem out for the default");
    t.gpu_mem = budget;
    t.hw.gpu->memory_bytes = budget;
    t.use = true;
    return t;
}

KvPlacement kv_placement_of(const planner::Plan& plan) {
    // K and V, or the hidden states they are recomputed from, all on the device.
    if (std::all_of(plan.layers.begin(), plan.layers.end(), [](const auto& l) { return planner::tier_of(l.kv) == planner::Tier::Gpu; }))
        return KvPlacement::Device;
    return plan.policy.cpu_attention ? KvPlacement::HostCpuAttention : KvPlacement::HostGpuAttention;
}

GpuPlacement place_on_gpu(const models::GgufFile& file, const ResidencyInput& in, const PlacementOptions& opts, const GpuTarget& gpu,
                          uint64_t device_bytes, DType kv_type, AttentionChoice attention) {
    GpuPlacement g;
    Placement& p = g.placement;
    p.shape = planner::ModelShape::from_gguf(file);
    p.shape.kv_type = kv_type;
    p.hw = gpu.hw;
    p.hw_source = "this machine's GPU and " + std::string(p.hw.source);
    const planner::Workload wl = runtime_workload(opts.n_ctx, opts.n_predict);
    choose_plan(p, in, wl, opts, [&](planner::PlannerOptions& po, const planner::ModelShape&) {
        po.budgets.gpu = static_cast<double>(device_bytes);
        if (in.budget) po.budgets.dram = static_cast<double>(in.budget - std::min(in.budget, in.other_bytes));
        po.gpu_layers_only = true;
        po.allow_cpu_attention = attention != AttentionChoice::Gpu;
        po.require_cpu_attention = attention == AttentionChoice::Cpu;
    });
    p.plan.workload = wl;
    p.plan.prediction = planner::evaluate_plan(p.shape, p.hw, wl, p.plan);
    g.kv = kv_placement_of(p.plan);
    if (attention == AttentionChoice::Cpu) g.kv = KvPlacement::HostCpuAttention;
    if (attention == AttentionChoice::Gpu && g.kv == KvPlacement::HostCpuAttention) g.kv = KvPlacement::HostGpuAttention;
    STRATA_LOG_INFO("{}{}; KV cache: {}", planner::plan_summary(p.plan), opts.given ? " (given)" : "", kv_placement_name(g.kv));
    if (opts.on_plan) opts.on_plan(p);
    p.residency = residency_from_plan(p.plan, in, true);
    p.n_kv_layers_in_dram = g.kv == KvPlacement::Device ? 0 : p.shape.n_layer;
    return g;
}

}  // namespace strata::runtime
