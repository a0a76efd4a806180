#include "runtime/place/run_layout.h"

#include <algorithm>
#include <functional>
#include <utility>

#include <fmt/format.h>

#include "core/bytes.h"
#include "core/cache_dir.h"
#include "core/error.h"
#include "core/log.h"
#include "models/hparams.h"
#include "planner/expert_placement.h"
#include "planner/units.h"
#include "runtime/kv/kv_spill.h"
#include "runtime/place/expert_offload.h"
#include "runtime/place/tensor_overrides.h"
#include "storage/budget.h"
#include "storage/pinned_pool.h"

namespace strata::runtime {

namespace {

// The staging of a KV spill's writes: up to KvSpill::kStagedBlocks blocks of a layer, taken when
// the cache is made while the budget has room; the layouts leave room for it.
uint64_t kv_write_staging(const KvSize& kv) {
    return kv.layer_bytes / uint64_t(kv.n_blocks) * uint64_t(std::min(kv.n_blocks, KvSpill::kStagedBlocks));
}
// The DRAM spilling `n_spilled` KV layers takes: its ring of depth + 1 layers, and `staging`.
uint64_t kv_spill_bytes(const KvSize& kv, int n_spilled, int prefetch_depth, uint64_t staging) {
    return ring_bytes(kv.layer_bytes, std::min(n_spilled, std::max(1, prefetch_depth + 1))) + staging;
}

// `in` as the cache holds it with its layers from n_kv_dram on spilled (layout_on_cpu): the first
// layers' keys and values in DRAM, the spill's ring and write staging for the others.
ResidencyInput with_kv_spilled(const ResidencyInput& in, const KvSize& kv, int n_kv_dram) {
    const auto n_layer = static_cast<int>(in.layer_bytes.size());
    if (kv.n_rebuilt > 0) return in;  // rebuilt layers stay in DRAM whole (the layout refuses to spill them)
    ResidencyInput held = in;
    held.other_bytes = in.other_bytes - kv.all_bytes + uint64_t(std::min(n_kv_dram, n_layer)) * kv.resident_layer_bytes;
    if (n_kv_dram < n_layer) held.other_bytes += kv_spill_bytes(kv, n_layer - n_kv_dram, in.prefetch_depth, kv_write_staging(kv));
    return held;
}

// Whether a given plan's run keeps the KV cache on the device: the plan keeps it there and
// --attention does not ask for the CPU.
bool device_keeps_kv(const planner::Plan& plan, AttentionChoice attention) {
    return kv_placement_of(plan) == KvPlacement::Device && attention != AttentionChoice::Cpu;
}

// `in` as the host holds a device plan's KV cache kept on the device: the KV of the layers the
// plan leaves to the CPU only, unspilled (layout_with_gpu).
ResidencyInput with_kv_of_cpu_layers(const ResidencyInput& in, const KvSize& kv, const planner::Plan& plan) {
    ResidencyInput unbounded = in;
    unbounded.budget = 0;
    ResidencyInput held = in;
    held.other_bytes += KvCache::layers_bytes(residency_from_plan(plan, unbounded, true).on_cpu, kv.rebuilt,
                                              kv.resident_layer_bytes, kv.hidden_layer_bytes);
    held.other_bytes -= kv.all_bytes;
    return held;
}

// A KV cache on the host beside a device keeps every layer's K and V, which may spill: the device
// backend recomputes K and V only with the cache on the device. `in` and `kv` counted so.
void keep_every_kv_layer(ResidencyInput& in, KvSize& kv) {
    if (kv.n_rebuilt == 0) return;
    const uint64_t whole = kv.layer_bytes * in.layer_bytes.size();
    in.other_bytes = in.other_bytes - kv.all_bytes + whole;
    kv.all_bytes = whole;
    kv.rebuilt.clear();
    kv.n_rebuilt = 0;
}

// KV layers that stay in DRAM: all of them when they fit next to the smallest weight
// footprint (head, embeddings, the streaming ring); otherwise the last layers spill to disk
// through a ring of their own and the staging for their writes.
int kv_layers_in_dram(const ResidencyInput& in, const KvSize& kv, int n_layer) {
    const uint64_t weights_floor = least_weight_bytes(in) + (in.other_bytes - kv.all_bytes);
    if (in.budget == 0 || weights_floor + kv.all_bytes <= in.budget) return n_layer;
    const uint64_t spill = kv_spill_bytes(kv, n_layer, in.prefetch_depth, kv_write_staging(kv));
    // Refused below the lesser of keeping the cache and spilling all of it (a small cache's spill
    // ring, in whole huge pages, can take more than the cache itself).
    if (kv.all_bytes <= spill) check_min_budget(in, weights_floor + kv.all_bytes);
    check_min_budget(with_kv_spilled(in, kv, 0), weights_floor + spill);
    return static_cast<int>(std::min<uint64_t>(n_layer - 1, (in.budget - weights_floor - spill) / kv.layer_bytes));
}

// The DRAM a given plan takes beside `in` (its budget aside): its layers as it holds them (those
// on a device, `gpu`, none), the ring its streamed layers take.
uint64_t plan_dram(const planner::Plan& plan, ResidencyInput in, bool gpu) {
    in.budget = 0;
    return residency_from_plan(plan, in, gpu).total_bytes;
}

// The least DRAM a given plan runs in with its KV cache on the host: every layer spilled, or the
// whole cache kept where that is less (a small cache's spill ring, in whole huge pages, can take
// more than the cache).
uint64_t least_with_host_kv(ResidencyInput in, KvSize kv, const planner::Plan& plan, bool gpu) {
    if (gpu) keep_every_kv_layer(in, kv);
    return std::min(plan_dram(plan, with_kv_spilled(in, kv, 0), gpu), plan_dram(plan, with_kv_spilled(in, kv, INT_MAX), gpu));
}

// A given plan's KV layers in DRAM: as many of those it keeps there as fit beside its weights
// (its resident layers and ring), the rest spilled, so that the plan runs at the budget it was
// made for. 0 where even spilling every layer leaves too little room: placing it then says so.
int given_kv_layers_in_dram(const ResidencyInput& in, const KvSize& kv, int n_layer, const planner::Plan& plan, bool gpu) {
    // Layers rebuilt from saved hidden states keep them in DRAM and cannot spill: all of it stays.
    if (kv.n_rebuilt > 0) return n_layer;
    const auto planned = static_cast<int>(std::count_if(plan.layers.begin(), plan.layers.end(), [](const auto& l) {
        return planner::tier_of(l.kv) != planner::Tier::Nvme;
    }));
    if (in.budget == 0) return planned;
    // The plan's KV layers in DRAM, the others spilled (their ring and staging): all it asks fits.
    if (plan_dram(plan, with_kv_spilled(in, kv, planned), gpu) <= in.budget) return planned;
    const uint64_t least = least_with_host_kv(in, kv, plan, gpu);
    if (least > in.budget) return 0;
    return static_cast<int>(std::min<uint64_t>(std::min(planned, n_layer - 1), (in.budget - least) / kv.resident_layer_bytes));
}

// `in` with what the device backend holds in DRAM: its pinned host staging and, while the run
// loads, the load buffer, beside the weights, the KV cache and the host's activations (which
// serve the layers the CPU computes beside the device: the plan's, a mixture of experts' experts,
// layers moved off when device memory is lost).
ResidencyInput with_device_buffers(ResidencyInput in, const DeviceFootprint& device) {
    in.other_bytes += device.staging + device.load_buffer;
    return in;
}

// Runs `place`; a given plan it refuses for DRAM gets the --dram that holds it (`need`, where
// it says how much of the KV cache that counts).
template <class Place>
auto with_given_plan_hint(const PlacementOptions& po, const std::function<std::pair<uint64_t, const char*>()>& need,
                          Place&& place) {
    try {
        return place();
    } catch (const PlanOverBudget& e) {
        if (!po.given) throw;
        const auto [bytes, kv] = need();
        throw OutOfBudget(e.what(), fmt::format("use --dram {} or more (the plan's resident layers beside {}), "
                                                "or a plan that streams more layers (`strata plan --dram-budget SIZE -o FILE`)",
                                                format_bytes_at_least(bytes), kv));
    }
}

// A KV cache kept in DRAM whose layers from `n_resident` on spill to disk through a ring, and
// whose evicted prefix-cache blocks go to disk too when every layer is resident; MLA's rows
// are its keys and values both.
KvSpillOptions host_kv_spill(const models::Hparams& hp, int n_resident, const LayoutOptions& opts, const KvSize& kv,
                             storage::MemoryBudget& dram) {
    KvSpillOptions spill;
    spill.keys_only = hp.mla.enabled();
    spill.n_resident_layers = n_resident;
    spill.dir = opts.kv_spill_dir.empty() ? cache_dir() / "kv-spill" : opts.kv_spill_dir;
    spill.prefetch_depth = opts.prefetch_depth;
    spill.budget = &dram;
    spill.prefix_spill_bytes = opts.prefix_spill_bytes.value_or(4 * kv.all_bytes);
    return spill;
}

// The CPU alone's plan for this run, on the threads it would have without the device and with
// the KV cache in DRAM (spilling as layout_on_cpu would); nullopt where it cannot hold the run.
std::optional<planner::Prediction> cpu_alone_prediction(const models::GgufFile& file, const models::Hparams& hp,
                                                        const ResidencyInput& in, const PlacementOptions& po, const KvSize& kv) {
    PlacementOptions alone = po;
    alone.on_plan = nullptr;
    alone.n_threads = po.n_threads_alone;
    try {
        alone.n_kv_layers_in_dram = kv_layers_in_dram(in, kv, hp.n_layer);
        return place(file, with_kv_spilled(in, kv, alone.n_kv_layers_in_dram), alone).plan.prediction;
    } catch (const OutOfBudget&) {
        return std::nullopt;
    } catch (const UsageError&) {
        return std::nullopt;
    }
}

// A KV cache that stays in DRAM beside a GPU has its blocks copied in (each pass where the device
// attends there, a prompt's where the CPU does): page-locked, they go asynchronously at the
// link's rate. Every page becomes resident, so a cache of more than half this machine's memory
// (no --dram to bound it) is left to fill lazily, with staged copies.
void pin_for_device(KvCache& kv, const GpuTarget& gpu) {
    if (gpu.kind != DeviceKind::Cuda) return;
    if (kv.bytes() > system_ram_bytes() / 2) {
        STRATA_LOG_INFO("kv: the KV cache ({}) is more than half this machine's memory: left pageable, the device's "
                        "copies of its blocks staged by the driver", format_bytes(kv.bytes()));
        return;
    }
    kv.pin_resident(storage::host_pinner());
}

// With a device: its bytes for layers and KV are the budget less the backend's working set
// (sized for the largest layer as a streaming buffer, plus the K/V layer that recomputed
// layers share); KV on the device takes no DRAM, so the host cache is then never written. KV
// the plan keeps in DRAM spills its last layers to disk when DRAM cannot hold it all.
RunLayout layout_with_gpu(const models::GgufFile& file, const models::Hparams& hp, ResidencyInput in,
                          const PlacementOptions& po, const GpuTarget& gpu, const DeviceFootprint& device,
                          const LayoutOptions& opts, KvSize kv, storage::MemoryBudget& dram) {
    // The K/V layer that recomputed layers share: the plan may choose recompute.
    const uint64_t working = device.working_streamed + kv.layer_bytes;
    if (working >= gpu.gpu_mem)
        throw OutOfBudget(fmt::format("--gpu-mem {} is too small: activations, the output head and two layer "
                                      "buffers take {}", format_bytes(gpu.gpu_mem), format_bytes(working)),
                          "give more with --gpu-mem, or run on the CPU with --gpu-mem 0");
    in = with_device_buffers(in, device);
    // The plan is made for the DRAM left, so the spill's write staging is counted up front; a
    // given plan keeps the KV layers in DRAM that fit beside the weights it keeps there.
    const bool given_kv_on_device = po.given && device_keeps_kv(*po.given, opts.attention);
    if (!given_kv_on_device) keep_every_kv_layer(in, kv);
    const int n_kv_dram = given_kv_on_device ? hp.n_layer
                          : po.given     ? given_kv_layers_in_dram(in, kv, hp.n_layer, *po.given, true)
                                         : kv_layers_in_dram(in, kv, hp.n_layer);
    // DRAM as it is with the KV cache on the host: its layers kept in DRAM as they are held there,
    // the last ones spilled, as the layout on the CPU counts them. A given plan that keeps it on
    // the device leaves the host its CPU layers' only.
    const ResidencyInput host_kv = given_kv_on_device ? with_kv_of_cpu_layers(in, kv, *po.given) : with_kv_spilled(in, kv, n_kv_dram);
    PlacementOptions host_po = po;
    host_po.n_kv_layers_in_dram = n_kv_dram;
    const auto need = [&] {
        const bool cpu_layers = std::any_of(po.given->layers.begin(), po.given->layers.end(),
                                            [](const auto& l) { return planner::device_of(l.weights) == planner::Device::Cpu; });
        return std::pair{given_plan_least_dram(in, kv, *po.given, true, opts.attention),
                         !given_kv_on_device ? "its KV cache spilled to disk"
                         : cpu_layers        ? "the KV cache of the layers it leaves to the CPU"
                                             : "no KV cache in DRAM, the device holding it"};
    };
    GpuPlacement g = with_given_plan_hint(po, need, [&] {
        return place_on_gpu(file, host_kv, host_po, gpu, gpu.gpu_mem - working, opts.kv_type, opts.attention,
                            opts.op_offload.kind != OpOffloadMode::Off);
    });
    // The plan (given or made) says which layers recompute their KV.
    const std::vector<bool> rebuilt = rebuilt_layers(g.placement.plan);
    const bool recompute = std::find(rebuilt.begin(), rebuilt.end(), true) != rebuilt.end();
    KvSpillOptions spill = host_kv_spill(hp, g.kv == KvPlacement::Device ? hp.n_layer : n_kv_dram, opts, kv, dram);
    if (g.kv == KvPlacement::Device) spill.prefix_spill_bytes = 0;  // the host cache is not the master copy
    if (recompute && g.kv == KvPlacement::Device) {
        spill.rebuilt = rebuilt;
        spill.n_embd_hidden = hp.n_embd;
    } else if (recompute) {
        STRATA_LOG_WARN("gpu: the plan recomputes KV, which the device backend does with the KV cache on the "
                        "device only; this run keeps K and V ({})", kv_placement_name(g.kv));
    }
    RunLayout out;
    out.kv = std::make_unique<KvCache>(hp.n_layer, po.n_ctx, hp.n_embd_kv(), spill, kv.n_blocks, opts.kv_type);
    if (g.kv != KvPlacement::Device) pin_for_device(*out.kv, gpu);
    out.placement = std::make_unique<Placement>(std::move(g.placement));
    settle_op_offload(*out.placement, opts.op_offload, opts.max_pass_rows);
    out.kv_on = g.kv;
    if (g.kv == KvPlacement::Device) {
        // The host keeps the KV cache of the layers the plan leaves to the CPU only (as
        // host_working_bytes charges it), unspilled: the budget is checked again with it.
        in.other_bytes = in.other_bytes - kv.all_bytes + out.kv->layers_bytes(out.placement->residency.on_cpu);
        out.placement->residency = residency_from_plan(out.placement->plan, in, true);
    }
    // DRAM as the runtime counts it (the planner counted only the layers the plan keeps there).
    planner::Plan& plan = out.placement->plan;
    if (in.budget) plan.budgets.dram = static_cast<double>(in.budget);
    plan.prediction.used.dram = static_cast<double>(out.placement->residency.total_bytes);
    return out;
}

// On the CPU: the KV cache in DRAM, or its last layers spilled when even streaming every
// weight leaves too little room; then the planner decides which weight layers stay resident.
RunLayout layout_on_cpu(const models::GgufFile& file, const models::Hparams& hp, ResidencyInput in, PlacementOptions po,
                        const LayoutOptions& opts, const KvSize& kv, storage::MemoryBudget& dram) {
    const int n_kv_dram = po.given ? given_kv_layers_in_dram(in, kv, hp.n_layer, *po.given, false) : kv_layers_in_dram(in, kv, hp.n_layer);
    const auto need = [&, all_kv = in] { return std::pair{given_plan_least_dram(all_kv, kv, *po.given, false), "its KV cache spilled to disk"}; };
    KvSpillOptions spill = host_kv_spill(hp, n_kv_dram, opts, kv, dram);
    if (kv.n_rebuilt > 0 && spill.n_resident_layers < hp.n_layer)
        throw OutOfBudget(fmt::format("the plan recomputes {} KV layers from saved hidden states, which stay in "
                                      "DRAM, but the KV cache does not fit --dram {}",
                                      kv.n_rebuilt, format_bytes(in.budget)),
                          "give more --dram, or use a plan without recompute (strata plan --no-recompute)");
    spill.rebuilt = kv.rebuilt;
    spill.n_embd_hidden = hp.n_embd;
    RunLayout out;
    out.kv = std::make_unique<KvCache>(hp.n_layer, po.n_ctx, hp.n_embd_kv(), spill, kv.n_blocks, opts.kv_type);
    // Resident KV and the spill's buffers (charged to the budget by their pool) are what the
    // cache holds in DRAM.
    in.other_bytes = in.other_bytes - kv.all_bytes + out.kv->bytes() + out.kv->spill_buffer_bytes();
    po.n_kv_layers_in_dram = spill.n_resident_layers;  // the prediction prices the spilled KV reads
    out.placement = std::make_unique<Placement>(with_given_plan_hint(po, need, [&] { return place(file, in, po); }));
    return out;
}

// A mixture of experts with a device: every layer's attention on the device, its feed-forward
// on the host (runtime/exec/device/device_moe.cpp), the weights held as the CPU holds them (experts
// resident, or read through the expert cache when DRAM is short). The KV cache goes on the
// device when it fits beside the attention weights and the backend's working set, else it
// stays in DRAM and the CPU attends (not with --attention gpu).
RunLayout layout_moe_with_gpu(const models::GgufFile& file, const models::Hparams& hp, ResidencyInput in,
                              const PlacementOptions& po, const GpuTarget& gpu, const DeviceFootprint& device,
                              const LayoutOptions& opts, const KvSize& kv, storage::MemoryBudget& dram) {
    if (po.given && po.given->has_gpu)
        throw UsageError("--plan: a mixture of experts on the device runs by the CPU's plan for its experts (the "
                         "device takes every layer's attention); this plan places layers on a GPU",
                         "leave --plan out, or give a plan made without a GPU (`strata plan -m MODEL --dram ...`)");
    const uint64_t fixed = device.working_resident + device.attention_weights;
    if (fixed >= gpu.gpu_mem)
        throw OutOfBudget(fmt::format("--gpu-mem {} is too small: the attention weights, the output head and "
                                      "activations take {}", format_bytes(gpu.gpu_mem), format_bytes(fixed)),
                          "give more with --gpu-mem, or run on the CPU with --gpu-mem 0");
    const bool kv_fits = fixed + kv.all_bytes <= gpu.gpu_mem;
    if (!kv_fits && opts.attention == AttentionChoice::Gpu)
        throw OutOfBudget(fmt::format("--gpu-mem {} holds the attention weights and activations ({}) but not the KV "
                                      "cache ({}) beside them", format_bytes(gpu.gpu_mem), format_bytes(fixed),
                                      format_bytes(kv.all_bytes)),
                          "give more with --gpu-mem or a shorter --ctx, or leave --attention out to attend on the CPU");
    const OverrideRequest overrides = resolve_overrides(po.overrides, file);
    if (asks_device(overrides) && !device.experts_fit)
        throw UsageError(fmt::format("--override-tensor gives routed experts to the device, whose kernels do not run "
                                     "these experts"),
                         "keep them on the host: --override-tensor exps=dram");
    RunLayout out;
    in.other_bytes += device.staging + (device.experts_fit ? device.expert_staging : 0);
    PlacementOptions host_po = po;
    host_po.on_plan = nullptr;  // shown below, once the plan has the device in it
    const bool kv_on_device = kv_fits && opts.attention != AttentionChoice::Cpu;
    // With the KV cache in DRAM the device still stages one layer of it for a prompt's attention.
    if (!kv_on_device && fixed + kv.layer_bytes >= gpu.gpu_mem)
        throw OutOfBudget(fmt::format("--gpu-mem {} holds the attention weights and activations ({}) but not the layer of "
                                      "the KV cache a prompt's pass stages beside them ({})",
                                      format_bytes(gpu.gpu_mem), format_bytes(fixed), format_bytes(kv.layer_bytes)),
                          "give more with --gpu-mem or a shorter --ctx, or run on the CPU with --gpu-mem 0");
    if (kv_on_device) {
        KvSpillOptions spill = host_kv_spill(hp, hp.n_layer, opts, kv, dram);
        spill.prefix_spill_bytes = 0;  // the host cache is not the master copy
        out.kv = std::make_unique<KvCache>(hp.n_layer, po.n_ctx, hp.n_embd_kv(), spill, kv.n_blocks, opts.kv_type);
        in.other_bytes -= kv.all_bytes;
        out.placement = std::make_unique<Placement>(place(file, in, host_po));
    } else {
        out = layout_on_cpu(file, hp, in, host_po, opts, kv, dram);
        pin_for_device(*out.kv, gpu);
    }
    // KV in DRAM: the host attends, but to latent attention, which the device attends over the rows
    // copied up (--attention cpu asks for what the device backend then refuses, saying so).
    const bool device_attends = hp.mla.enabled() && opts.attention != AttentionChoice::Cpu;
    out.kv_on = kv_on_device ? KvPlacement::Device : device_attends ? KvPlacement::HostGpuAttention : KvPlacement::HostCpuAttention;
    // The plan as the device runs it, priced on the device's profile.
    Placement& p = *out.placement;
    p.hw = gpu.hw;
    p.hw_source = "this machine's GPU and " + std::string(p.hw.source);
    p.plan.budgets.gpu = static_cast<double>(gpu.gpu_mem);
    p.plan = planner::with_attention_on_gpu(std::move(p.plan), p.shape, p.hw, kv_on_device);
    // The device memory left beside the attention, the KV cache and activations holds routed
    // experts, and op offload's two slots of the largest layer where they pay.
    // (With the KV cache in DRAM, the device stages one layer's for a prompt's attention.)
    const uint64_t taken = fixed + (kv_on_device ? kv.all_bytes : kv.layer_bytes) + device.expert_scratch;
    if ((!device.experts_fit || taken >= gpu.gpu_mem) && asks_device(overrides))
        throw OutOfBudget(fmt::format("--gpu-mem {} leaves no room for routed experts beside the attention weights, the "
                                      "KV cache and activations ({})", format_bytes(gpu.gpu_mem), format_bytes(taken)),
                          "give more with --gpu-mem, or leave the experts on the host");
    const uint64_t dram_left = in.budget ? in.budget - std::min(in.budget, p.residency.total_bytes) : UINT64_MAX;
    const DeviceRoom room{gpu.gpu_mem > taken ? gpu.gpu_mem - taken : 0, device.working_streamed - device.working_resident,
                          device.expert_bytes, device.experts_fit, dram_left};
    place_beside_attention(p, overrides, opts.op_offload, opts.max_pass_rows, room, po.max_decode_step_s);
    STRATA_LOG_INFO("{}; KV cache: {}", planner::plan_summary(p.plan), kv_placement_name(out.kv_on));
    if (po.on_plan) po.on_plan(p);
    return out;
}

}  // namespace

KvSize kv_size(const models::Hparams& hp, int kv_positions, int n_ctx, DType kv_type, const planner::Plan* given) {
    KvSize kv;
    kv.n_blocks = KvCache::blocks_for(kv_positions > 0 ? kv_positions : n_ctx);
    kv.layer_bytes = KvCache::layer_bytes(kv.n_blocks, hp.n_embd_kv(), kv_type, /*keys_only=*/hp.mla.enabled());
    kv.resident_layer_bytes = KvCache::resident_layer_bytes(kv.n_blocks, hp.n_embd_kv(), kv_type, hp.mla.enabled());
    kv.hidden_layer_bytes = KvCache::hidden_layer_bytes(kv.n_blocks, hp.n_embd, kv_type);
    // Layers whose KV a given plan recomputes keep hidden states (on the CPU) and share one
    // K/V slot; their saved rows and the slot stay in DRAM.
    if (given) kv.rebuilt = rebuilt_layers(*given);
    kv.n_rebuilt = static_cast<int>(std::count(kv.rebuilt.begin(), kv.rebuilt.end(), true));
    kv.all_bytes = kv.layer_bytes * (hp.n_layer - kv.n_rebuilt + (kv.n_rebuilt > 0)) + kv.n_rebuilt * kv.hidden_layer_bytes;
    return kv;
}

uint64_t given_plan_least_dram(const ResidencyInput& in, const KvSize& kv, const planner::Plan& plan, bool gpu,
                               AttentionChoice attention) {
    if (gpu && device_keeps_kv(plan, attention)) return plan_dram(plan, with_kv_of_cpu_layers(in, kv, plan), true);
    return least_with_host_kv(in, kv, plan, gpu);
}

uint64_t given_device_plan_least_dram(const ResidencyInput& in, const DeviceFootprint& device, const KvSize& kv,
                                      const planner::Plan& plan) {
    return given_plan_least_dram(with_device_buffers(in, device), kv, plan, true);
}

RunLayout lay_out(const models::GgufFile& file, const models::Hparams& hp, const ResidencyInput& in,
                  const PlacementOptions& po, const LayoutOptions& lo, const KvSize& kv, storage::MemoryBudget& dram,
                  const GpuTarget& gpu, const DeviceFootprint* device) {
    if (!gpu.use && asks_device(resolve_overrides(po.overrides, file)))
        throw UsageError(fmt::format("--override-tensor gives routed experts to the device, but none is in use ({})",
                                     gpu.why_not),
                         "run on a device (--device cuda, or --device sim to try it), or place them in dram or nvme");
    if (!gpu.use) return layout_on_cpu(file, hp, in, po, lo, kv, dram);
    STRATA_ASSERT(device);
    // A plan made beside the device runs only where it beats the CPU alone's; shown once weighed.
    PlacementOptions beside = po;
    beside.on_plan = nullptr;
    if (!po.given && !asks_device(resolve_overrides(po.overrides, file)))
        if (auto alone = cpu_alone_prediction(file, hp, in, po, kv)) beside.alternative = PlanAlternative{"the CPU alone", *alone};
    const auto layout_device = [&](const PlacementOptions& o) {
        return hp.moe.enabled() ? layout_moe_with_gpu(file, hp, in, o, gpu, *device, lo, kv, dram)
                                : layout_with_gpu(file, hp, in, o, gpu, *device, lo, kv, dram);
    };
    RunLayout out;
    try {
        out = layout_device(beside);
    } catch (const OutOfBudget& e) {
        // A device the command did not name that cannot hold the run leaves it to the CPU alone.
        if (gpu.chosen || !beside.alternative) throw;
        STRATA_LOG_INFO("gpu: not used: {}", e.what());
        out = RunLayout{};
        out.cpu_alone_wins = true;
        return out;
    }
    // Weighed as it will run: a long prompt's CPU layers computed on the device where op offload does.
    const auto predict = [](const RunLayout& l) {
        const planner::Workload& wl = l.placement->plan.workload;
        return l.placement->predict(wl.prompt_len, wl.gen_len, wl.batch);
    };
    planner::Prediction with_device = predict(out);
    // The best plan's prediction, where it traded decode for the first token and a plan was made
    // again: the figure named for the device (as `strata plan` names it).
    std::optional<planner::Prediction> unbounded;
    // (A mixture trades decode only through op offload's slots, which `auto` may give up.)
    const bool may_bound = !hp.moe.enabled() || (out.placement->op_offload_rows > 0 && lo.op_offload.kind == OpOffloadMode::Auto);
    if (beside.alternative && !gpu.chosen && may_bound &&
        planner::trades_decode_for_prefill(with_device, beside.alternative->prediction)) {
        // Searched again to decode no slower (the first layout's buffers given back before the
        // second takes its own).
        unbounded = with_device;
        out = RunLayout{};
        PlacementOptions bounded = beside;
        bounded.max_decode_step_s = beside.alternative->prediction.decode.time_s;
        try {
            out = layout_device(bounded);
            with_device = predict(out);
        } catch (const OutOfBudget& e) {
            STRATA_LOG_INFO("gpu: not used: the best plan decodes slower than the CPU alone, and none decoding no slower "
                            "runs: {}", e.what());
            out = RunLayout{};
            out.cpu_alone_wins = true;
            out.device_prediction = unbounded;
            return out;
        }
    }
    if (beside.alternative && !planner::device_beats_cpu(with_device, beside.alternative->prediction)) {
        const planner::Prediction& cpu = beside.alternative->prediction;
        const std::string weighed = fmt::format("the CPU alone is predicted at {:.1f} tokens/s (first token in {}), the "
                                                "device's plan at {:.1f} ({})",
                                                cpu.decode_tps_per_seq, planner::format_seconds(cpu.ttft_s),
                                                with_device.decode_tps_per_seq, planner::format_seconds(with_device.ttft_s));
        if (gpu.chosen) {
            STRATA_LOG_WARN("gpu: {}; running on the device as --device asks (leave --device out to let the planner choose)",
                            weighed);
        } else {
            STRATA_LOG_INFO("gpu: not used: {}{}", weighed, unbounded ? " (made again to decode no slower)" : "");
            out.cpu_alone_wins = true;
            out.device_prediction = unbounded ? *unbounded : with_device;
            return out;
        }
    }
    if (unbounded) {
        out.placement->unbounded = unbounded;
        STRATA_LOG_INFO("gpu: the best plan decodes at {:.1f} tokens/s, slower than the CPU alone's {:.1f}; one made again "
                        "to decode no slower runs: {:.1f} (first token in {})",
                        unbounded->decode_tps_per_seq, beside.alternative->prediction.decode_tps_per_seq,
                        with_device.decode_tps_per_seq, planner::format_seconds(with_device.ttft_s));
    }
    if (po.on_plan) po.on_plan(*out.placement);
    return out;
}

uint64_t host_working_bytes(const RunLayout& layout, bool on_device, uint64_t activations) {
    // KV on the device takes no DRAM but for the layers the plan runs on the CPU.
    const bool kv_on_device = on_device && layout.kv_on == KvPlacement::Device;
    return (kv_on_device ? layout.kv->layers_bytes(layout.placement->residency.on_cpu) : layout.kv->bytes()) + activations;
}

}  // namespace strata::runtime
