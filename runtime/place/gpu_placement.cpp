#include "runtime/place/gpu_placement.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/bytes.h"
#include "core/error.h"
#include "core/log.h"
#include "core/model_paths.h"
#include "cpu/kv_format.h"
#include "cpu/quant.h"
#include "cpu/thread_pool.h"
#include "gpu/cuda_devices.h"
#include "gpu/cuda_kernels.h"
#include "gpu/device.h"
#include "models/gguf_file.h"
#include "planner/cost_model.h"
#include "planner/policy_search.h"
#include "probe/probe.h"
#include "runtime/place/model_file_rate.h"
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

std::optional<DeviceKind> parse_device(std::string_view s) {
    if (s == "auto") return DeviceKind::Auto;
    if (s == "cpu") return DeviceKind::Cpu;
    if (s == "sim") return DeviceKind::Sim;
    if (s == "cuda") return DeviceKind::Cuda;
    return std::nullopt;
}

namespace {

// What a device's kernels read.
struct DeviceTypes {
    bool (*weight)(DType);
    bool (*kv)(DType);
};
const DeviceTypes kCudaTypes{gpu::gpu_weight_type, gpu::gpu_kv_type};
const DeviceTypes kSimTypes{cpu::has_kernels, cpu::is_kv_type};

// Why the device's kernels cannot run this model, or empty.
std::string unsupported_types(const DeviceTypes& can, const models::GgufFile& file, const models::Hparams& hp, DType kv_type,
                              AttentionChoice attention) {
    const ModelWeights w = ModelWeights::bind(file, hp);
    if (!can.weight(w.output.type)) return fmt::format("the output head is {}", dtype_name(w.output.type));
    for (size_t il = 0; il < w.layers.size(); ++il) {
        const LayerWeights& l = w.layers[il];
        for (const WeightRef* r : {&l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_gate, &l.ffn_up, &l.ffn_down})
            if (*r && !can.weight(r->type)) return fmt::format("layer {} has {} weights", il, dtype_name(r->type));
    }
    if (attention != AttentionChoice::Cpu && !can.kv(kv_type))
        return fmt::format("its attention kernels do not read a {} KV cache (use --attention cpu)", dtype_name(kv_type));
    return {};
}

// The simulated device as the planner sees it: its memory is the budget, its link the throttled
// copies, its compute the CPU's matmul rates on its threads (as `strata probe` measured them for
// that thread count, else the CPU's scaled by its share of the cores).
planner::HardwareProfile sim_profile(const GpuRequest& req, uint64_t budget, DType weight_type, const models::Hparams& hp,
                                     int host_threads) {
    std::string source;
    planner::HardwareProfile hw = runtime_profile(source);
    const int threads = sim_thread_count(req);
    planner::GpuProfile g;
    g.name = "simulated device";
    g.memory_bytes = budget;
    g.h2d_gbps = g.d2h_gbps = req.sim_link_gbps;
    g.pcie = fmt::format("simulated, {} GB/s", req.sim_link_gbps);
    g.sim_threads = threads;
    // The host keeps the cores the device's threads leave (runtime/engine.cpp), or what -t gives it.
    const int host = host_threads > 0 ? host_threads : std::max(1, hw.cpu.n_threads - threads);
    g.sim_cores = planner::sim_effective_threads(threads, host, hw.cpu.n_threads);
    if (hw.sim && hw.sim->n_threads == threads) {
        // Priced from its ops as the probe measured them through the device interface; its copies
        // at the link's rate, or at the rate its memory copies reach when that is lower.
        const planner::DeviceOps& ops = *hw.sim;
        g.ops = ops;
        if (ops.h2d_gbps > 0) g.h2d_gbps = std::min(g.h2d_gbps, ops.h2d_gbps);
        if (ops.d2h_gbps > 0) g.d2h_gbps = std::min(g.d2h_gbps, ops.d2h_gbps);
        g.handoff_us = ops.hop_us();
        if (const planner::KernelRate* r = planner::rate_for(ops.rates, weight_type)) {
            g.mem_gbps = r->gemv_gbps;
            g.fp16_tflops = r->gemm_at(hp.n_embd) / 1000;
        }
        hw.notes.push_back(fmt::format("gpu: the simulated device on {} threads, its ops as `strata probe` measured them", threads));
    } else {
        const double share = std::min(1.0, g.sim_cores / std::max(1, hw.cpu.n_threads));
        g.mem_gbps = hw.cpu.gemv_gbps_for(weight_type) * share;
        g.fp16_tflops = hw.cpu.gemm_gflops_for(weight_type, hp.n_embd) * share / 1000;
        g.launch_overhead_us = hw.cpu.layer_overhead_us;
        hw.notes.push_back(fmt::format("gpu: the simulated device on {} threads, its rates the CPU's scaled to them "
                                       "(`strata probe` measures its ops)", threads));
    }
    hw.gpu = g;
    return hw.on_cpu_threads(host);
}

GpuTarget sim_target(const GpuRequest& req, const models::GgufFile& file, const models::Hparams& hp, DType kv_type,
                     int host_threads) {
    GpuTarget t;
    if (std::string why = unsupported_types(kSimTypes, file, hp, kv_type, req.attention); !why.empty()) {
        t.why_not = "the simulated device cannot run this model: " + why;
        return t;
    }
    t.kind = DeviceKind::Sim;
    t.gpu_mem = req.gpu_mem ? *req.gpu_mem : system_ram_bytes() / 4;
    // Its matmuls' type: the feed-forward's, or the attention's when experts run on the host.
    const LayerWeights& first = ModelWeights::bind(file, hp).layers.front();
    t.hw = sim_profile(req, t.gpu_mem, first.ffn_up ? first.ffn_up.type : first.wq.type, hp, host_threads);
    t.use = true;
    return t;
}

// The probe's profile when it saw this GPU: the cached one where this build's probe made it,
// else a quick probe, cached for the next run (its device ops measured, as the cached one's were).
// Where it holds no GPU, the GPU from the driver and the catalog, its copies not measured.
planner::HardwareProfile gpu_profile() {
    std::string source;
    planner::HardwareProfile hw = probe::measured_profile(source, models_dir());
    STRATA_LOG_INFO("placement: hardware profile from {}: {}", source, hw.summary());
    if (!hw.has_gpu()) probe::probe_gpu(hw, false);
    return hw;
}

// The prompts' activations the planner counts on the device (one pass's, of the batch's
// prompts). The device backend's working set, taken from the budget before planning, already holds
// its passes' activations (DeviceBackend::footprint).
double planner_prefill_activations(const planner::ModelShape& s, const planner::HardwareProfile& hw,
                                   const planner::Workload& wl) {
    const planner::CostModel cm(s, hw, wl, planner::Policy{wl.batch, 1, false, false, s.kv_type});
    return cm.fixed().bytes[static_cast<size_t>(planner::Tier::Gpu)];
}

GpuTarget any_gpu(const GpuRequest& req, const models::GgufFile& file, const models::Hparams& hp, DType kv_type,
                  int host_threads) {
    GpuTarget t;
    if (req.device == DeviceKind::Cpu) {
        t.why_not = "--device cpu";
        return t;
    }
    if (req.gpu_mem && *req.gpu_mem == 0) {
        t.why_not = "--gpu-mem 0";
        return t;
    }
    if (req.device == DeviceKind::Sim) {
        t = sim_target(req, file, hp, kv_type, host_threads);
        t.chosen = true;
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
    if (std::string why = unsupported_types(kCudaTypes, file, hp, kv_type, req.attention); !why.empty()) {
        t.why_not = "the GPU kernels cannot run this model: " + why;
        return t;
    }
    t.hw = gpu_profile().on_cpu_threads(host_threads);
    const uint64_t budget = req.gpu_mem ? *req.gpu_mem : static_cast<uint64_t>(planner::default_budgets(t.hw).gpu);
    if (budget > d.total_bytes)
        throw UsageError(fmt::format("--gpu-mem {} is more than {}'s {}", format_bytes(budget), d.name,
                                     format_bytes(d.total_bytes)),
                         "give at most what the device has, or leave --gpu-mem out for the default");
    t.gpu_mem = budget;
    t.hw.gpu->memory_bytes = budget;
    t.kind = DeviceKind::Cuda;
    t.use = true;
    t.chosen = req.device == DeviceKind::Cuda;
    return t;
}

}  // namespace

GpuTarget find_gpu(const GpuRequest& req, const models::GgufFile& file, const models::Hparams& hp, DType kv_type,
                   int host_threads) {
    GpuTarget t = any_gpu(req, file, hp, kv_type, host_threads);
    // A GPU the command named and cannot have: refused, not run on the CPU behind a warning.
    if (req.device == DeviceKind::Cuda && !t.use)
        throw UsageError(fmt::format("--device cuda: no GPU can run this ({})", t.why_not),
                         "run with --device cpu, or --device auto to use a GPU where there is one");
    return t;
}

std::unique_ptr<gpu::Device> open_device(const GpuTarget& target, const GpuRequest& req, bool int8_activations) {
    STRATA_ASSERT(target.use);
    if (target.kind == DeviceKind::Cuda) return gpu::make_cuda_device(0, target.gpu_mem);
    gpu::SimOptions o;
    o.budget_bytes = target.gpu_mem;
    o.link_gbps = req.sim_link_gbps;
    o.n_threads = sim_thread_count(req);
    o.int8_activations = int8_activations;
    o.shrink_after = req.sim_shrink_after;
    o.shrink_bytes = req.sim_shrink_bytes;
    return gpu::make_sim_device(o);
}

KvPlacement kv_placement_of(const planner::Plan& plan) {
    // K and V, or the hidden states they are recomputed from, all on the device.
    if (std::all_of(plan.layers.begin(), plan.layers.end(), [](const auto& l) { return planner::tier_of(l.kv) == planner::Tier::Gpu; }))
        return KvPlacement::Device;
    return plan.policy.cpu_attention ? KvPlacement::HostCpuAttention : KvPlacement::HostGpuAttention;
}

GpuPlacement place_on_gpu(const models::GgufFile& file, const ResidencyInput& in, const PlacementOptions& opts, const GpuTarget& gpu,
                          uint64_t device_bytes, DType kv_type, AttentionChoice attention, bool op_offload) {
    GpuPlacement g;
    Placement& p = g.placement;
    // The layers the engine runs (EngineOptions::n_layers may cut the model short).
    p.shape = planner::ModelShape::from_gguf(file).first_layers(static_cast<int32_t>(in.layer_bytes.size()));
    p.shape.kv_type = kv_type;
    p.hw = gpu.hw;
    if (opts.time_model_file && may_stream(in, opts.given)) measure_model_file_reads(p.hw.nvme, file.path());
    p.hw_source = "this machine's GPU and " + std::string(p.hw.source);
    const planner::Workload wl = runtime_workload(opts);
    // The device backend recomputes KV only with every layer's KV cache on the device: a plan
    // that recomputes some layers and keeps others' KV on the host is made again without it.
    bool allow_recompute = true;
    const auto recomputes_beside_host_kv = [&] {
        const std::vector<bool> rebuilt = rebuilt_layers(p.plan);
        return std::find(rebuilt.begin(), rebuilt.end(), true) != rebuilt.end() && kv_placement_of(p.plan) != KvPlacement::Device;
    };
    const auto tune = [&](planner::PlannerOptions& po, const planner::ModelShape& as_read) {
        // Counted once: a batch's long prompts would otherwise take the room of layers and KV.
        const double prefill = planner_prefill_activations(as_read, p.hw, wl);
        po.budgets.gpu = static_cast<double>(device_bytes) + prefill;
        po.gpu_budget_note = fmt::format("the device's {} left beside its working set, plus the {} of the prompts' "
                                         "activations the planner counts there",
                                         format_bytes(device_bytes), format_bytes(static_cast<uint64_t>(prefill)));
        po.infeasible_hint = "give more --gpu-mem or --dram, a shorter --ctx, or run on the CPU with --gpu-mem 0";
        // DRAM left for the layers it keeps there: the runtime also holds the head and embeddings,
        // the KV cache and activations, the device backend's buffers, and a ring for layers
        // streamed from NVMe, whatever the plan; the planner counts none of them again (nor the
        // staged KV layer in the device's working set).
        po.limits.dram_held_apart = true;
        po.limits.head_on_device = true;     // DeviceBackend holds the head on the device, in its working set,
        po.limits.embedding_on_host = true;  // and looks embeddings up in DRAM
        if (in.budget) {
            const uint64_t held = in.fixed_bytes + in.other_bytes, ring = full_ring_bytes(in);
            check_min_budget(in, held + ring);  // every layer on the device or read from NVMe
            po.budgets.dram = static_cast<double>(in.budget - std::min(in.budget, held + ring));
            po.dram_budget_note = fmt::format("the run's {} of DRAM less the KV cache, activations, head, embeddings and "
                                              "the device backend's buffers ({}) and the ring for layers read from NVMe ({})",
                                              format_bytes(in.budget), format_bytes(held), format_bytes(ring));
        }
        // The device runtime runs CPU layers too, and recomputes KV from hidden states on the device.
        po.allow_recompute = allow_recompute;
        po.limits.recompute_on_gpu_only = true;
        po.limits.device_slots = kDeviceSlots;  // each step priced as the device backend issues it
        po.limits.op_offload = op_offload;
        po.max_decode_step_s = opts.max_decode_step_s;
        // Latent attention (deepseek2) has no CPU attention beside a device (DeviceBackend refuses it).
        po.allow_cpu_attention = attention != AttentionChoice::Gpu && p.shape.kv_latent == 0;
        po.require_cpu_attention = attention == AttentionChoice::Cpu;
    };
    choose_plan(p, in, wl, opts, tune);
    if (!opts.given && recomputes_beside_host_kv()) {
        allow_recompute = false;
        choose_plan(p, in, wl, opts, tune);
    }
    p.plan.workload = wl;
    // A given plan's batch, micro-batches and KV type are its own workload's: priced as this run runs.
    p.plan.policy.batch = wl.batch;
    p.plan.policy.n_micro = 1;
    p.plan.policy.kv_type = kv_type;
    // A given plan's too: the runtime computes the head on the device, looks embeddings up on the host.
    p.plan.output = planner::WeightOption::Gpu;
    p.plan.embedding = planner::WeightOption::DramCpu;
    // Priced as it runs: layers read from NVMe at the rate of the ring's reads in flight, as searched.
    planner::RuntimeLimits as_run = run_limits(in.prefetch_depth, p.shape, p.shape.kv_type, p.hw.nvme);
    as_run.dram_held_apart = true;
    as_run.head_on_device = as_run.embedding_on_host = true;
    g.kv = kv_placement_of(p.plan);
    if (attention == AttentionChoice::Cpu) g.kv = KvPlacement::HostCpuAttention;
    if (attention == AttentionChoice::Gpu && g.kv == KvPlacement::HostCpuAttention) g.kv = KvPlacement::HostGpuAttention;
    // KV on the host whose last layers the cache spills for the budget: shown and priced on disk, as they run.
    if (g.kv != KvPlacement::Device)
        for (auto& l : p.plan.layers)
            if (l.layer >= opts.n_kv_layers_in_dram && l.kv == planner::KvOption::Dram) l.kv = planner::KvOption::Nvme;
    p.limits = as_run;
    p.plan.prediction = planner::evaluate_plan(p.shape, p.hw, wl, p.plan, as_run);
    STRATA_LOG_INFO("{}{}; KV cache: {}", planner::plan_summary(p.plan), opts.given ? " (given)" : "", kv_placement_name(g.kv));
    p.alternative = opts.alternative;
    if (opts.on_plan) opts.on_plan(p);
    p.residency = residency_from_plan(p.plan, in, true);
    p.n_kv_layers_in_dram = g.kv == KvPlacement::Device ? 0 : std::min(opts.n_kv_layers_in_dram, p.shape.n_layer);
    return g;
}

int sim_thread_count(const GpuRequest& req) { return req.sim_threads > 0 ? req.sim_threads : gpu::default_sim_threads(); }

int host_thread_count(const GpuRequest& req, int n_threads) {
    // --gpu-mem 0 runs the CPU alone: no simulated device takes cores.
    if (n_threads > 0 || req.device != DeviceKind::Sim || req.gpu_mem == uint64_t{0}) return n_threads;
    return std::max(1, cpu::default_thread_count() - sim_thread_count(req));
}

}  // namespace strata::runtime
