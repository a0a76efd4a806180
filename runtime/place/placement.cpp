#include "runtime/place/placement.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "core/model_paths.h"
#include "models/gguf_file.h"
#include "planner/catalog.h"
#include "planner/policy_search.h"
#include "planner/units.h"
#include "probe/probe.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/place/expert_offload.h"
#include "runtime/place/model_file_rate.h"
#include "storage/budget.h"
#include "storage/file_io.h"
#include "storage/reader.h"

namespace strata::runtime {

using planner::KvOption;
using planner::WeightOption;

unsigned stream_read_chunks(const planner::DiskProfile& disk) {
    const storage::ReaderOptions reader;
    const double knee = disk.saturating_inflight_bytes(kSaturatingRateFraction);
    if (knee <= 0) return reader.queue_depth;
    const auto chunks = static_cast<unsigned>(std::ceil(knee / static_cast<double>(reader.chunk_bytes)));
    return std::clamp(chunks, 2u, reader.queue_depth);
}

// How this runtime streams layers and spilled KV: through rings of prefetch depth + 1 buffers
// (runtime/weights/stream_ring.h, runtime/kv/kv_spill.h), a spilled layer's blocks of
// KvCache::kBlockSize positions each padded to the O_DIRECT alignment; layers copied to a device
// through its ring of kDeviceSlots.
planner::RuntimeLimits run_limits(int prefetch_depth, const planner::ModelShape& shape, DType kv_type,
                                  const planner::DiskProfile& disk) {
    planner::RuntimeLimits limits;
    limits.stream_slots = std::max(1, prefetch_depth + 1);
    const storage::ReaderOptions reader;  // the weight store's reader (WeightStore)
    limits.stream_inflight_bytes = static_cast<double>(stream_read_chunks(disk)) * static_cast<double>(reader.chunk_bytes);
    limits.device_slots = kDeviceSlots;
    const double block = double(KvCache::kBlockSize) * row_bytes(kv_type, shape.n_embd_kv());
    const double padded = std::ceil(block / storage::kDefaultDioAlign) * storage::kDefaultDioAlign;
    limits.kv_spill_bytes_factor = block > 0 ? padded / block : 1;
    limits.kv_spill_inflight_bytes = static_cast<double>(reader.queue_depth) * static_cast<double>(reader.chunk_bytes);  // KvSpill's reader
    return limits;
}

namespace {

// The plan as this runtime runs it: K and V in the KV cache's type (runtime/kv/kv_cache.h) in
// DRAM for the first n_kv_in_dram layers and spilled to disk for the rest, or the saved hidden
// states of the layers the plan recomputes in DRAM, attention on the CPU, the output layer and
// embedding table in DRAM.
planner::Plan as_run(planner::Plan p, DType kv_type, int n_kv_in_dram = INT_MAX) {
    const std::vector<bool> rebuilt = rebuilt_layers(p);
    p.policy.kv_type = kv_type;
    p.policy.recompute = std::find(rebuilt.begin(), rebuilt.end(), true) != rebuilt.end();
    p.policy.cpu_attention = true;
    p.output = p.embedding = WeightOption::DramCpu;
    p.hidden = planner::HiddenOption::Dram;
    for (auto& l : p.layers) {
        l.kv = rebuilt[l.layer] ? KvOption::ActDram : l.layer < n_kv_in_dram ? KvOption::Dram : KvOption::Nvme;
        l.attention = planner::Device::Cpu;
    }
    return p;
}

}  // namespace

double streamed_read_gbps(const Placement& p) {
    const double ring = run_limits(p.prefetch_depth, p.shape, p.shape.kv_type, p.hw.nvme).ring_inflight_bytes(double(p.residency.slot_bytes));
    return p.hw.nvme.model_file_gbps_at(ring);
}

namespace {

// Every layer in DRAM, or every layer on NVMe: the two ends of what the planner may choose.
double planner_dram(const planner::ModelShape& s, const planner::HardwareProfile& hw, const planner::Workload& wl,
                    WeightOption w) {
    planner::Plan p;
    p.model_name = s.name;
    p.n_layer = s.n_layer;
    p.model_weight_bytes = s.total_weight_bytes();
    p.weight_type = s.weight_type;
    p.workload = wl;
    p.policy.batch = wl.batch;  // the KV cache and activations of every sequence, as the search's plans count them
    for (int32_t il = 0; il < s.n_layer; ++il) p.layers.push_back({il, w, KvOption::Dram, planner::Device::Cpu});
    return planner::evaluate_plan(s, hw, wl, as_run(p, s.kv_type)).used.dram;
}

// The planner's DRAM budget standing for the runtime's. The cost model counts DRAM its own
// way (a prefill working set, two staging buffers), the runtime its own (one ubatch of
// activations, depth + 1 ring buffers). The budget is shifted by the largest difference over
// any choice of streamed layers, so whatever the planner keeps resident, the runtime can
// hold. `s` counts each layer as the runtime reads it (ResidencyInput::layer_bytes).
double planner_budget(const ResidencyInput& in, const planner::ModelShape& s, const planner::HardwareProfile& hw,
                      const planner::Workload& wl) {
    constexpr double kSlack = 4096;  // covers the planner's tolerance in `fits` and float sums
    uint64_t all = in.fixed_bytes + in.other_bytes;
    for (uint64_t b : in.layer_bytes) all += b;
    const double p_all = planner_dram(s, hw, wl, WeightOption::DramCpu);
    if (in.budget == 0 || all <= in.budget) return p_all + kSlack;  // everything stays resident

    // The runtime's ring over the cost model's two staging buffers, at worst (m is the
    // largest streamed layer; fewer streamed layers only shrink the ring).
    double ring_excess = 0;
    for (uint64_t m : in.layer_bytes)
        ring_excess = std::max(ring_excess, static_cast<double>(ring_bytes(m, ring_slots(in))) - 2.0 * static_cast<double>(m));
    const double delta = static_cast<double>(all) - p_all + ring_excess;
    // Streaming every layer needs the least; it fits when the budget holds the full ring, and
    // p_none admits that plan. A budget that holds everything needs no ring at all.
    check_min_budget(in, std::min(all, in.fixed_bytes + in.other_bytes + full_ring_bytes(in)));
    const double p_none = planner_dram(s, hw, wl, WeightOption::NvmeCpu);
    const double budget = std::max(static_cast<double>(in.budget) - delta - kSlack, p_none);
    STRATA_LOG_DEBUG("placement: the planner's DRAM budget is {} for the runtime's {}", planner::format_size(budget),
                     format_bytes(in.budget));
    return budget;
}

}  // namespace

std::vector<bool> rebuilt_layers(const planner::Plan& plan) {
    std::vector<bool> r(plan.layers.size(), false);
    for (const auto& l : plan.layers)
        if (l.layer >= 0 && l.layer < static_cast<int>(r.size())) r[l.layer] = planner::is_recompute(l.kv);
    return r;
}

planner::Prediction Placement::predict(int n_prompt, int n_generated, int batch, int decode_rows) const {
    planner::Workload wl;
    wl.prompt_len = std::max(1, n_prompt);
    wl.gen_len = std::max(1, n_generated);
    wl.batch = std::max(1, batch);
    wl.decode_rows = std::max(1, decode_rows);
    // A GPU plan runs as planned (runtime/place/gpu_placement.h); a CPU one as this runtime holds it.
    planner::Plan run = plan.has_gpu ? plan : as_run(plan, shape.kv_type, n_kv_layers_in_dram);
    run.policy.batch = wl.batch;  // the scheduler runs them all in one pass
    run.policy.n_micro = 1;
    const planner::Prediction pred = planner::evaluate_plan(shape, hw, wl, run, limits);
    // A batch's prompts go through the device in passes too; priced for one sequence's, as chosen.
    if (op_offload_rows <= 0 || wl.batch > 1) return pred;
    const double saved = planner::op_offload_saving_s(shape, hw, run, wl.prompt_len, max_pass_rows, op_offload_rows);
    return planner::with_saving(pred, saved, wl);
}

planner::HardwareProfile runtime_profile(std::string& source, int n_threads) {
    planner::HardwareProfile hw = probe::measured_profile(source, models_dir());
    if (n_threads > 0 && n_threads < hw.cpu.n_threads) {
        source += fmt::format(" on {} of its {} CPU threads", n_threads, hw.cpu.n_threads);
        hw = hw.on_cpu_threads(n_threads);
    }
    if (hw.gpu) {
        hw.gpu.reset();
        source += ", its GPU left out as the runtime computes on the CPU";
    }
    STRATA_LOG_INFO("placement: hardware profile from {}: {}", source, hw.summary());
    return hw;
}

planner::Workload runtime_workload(const PlacementOptions& opts) {
    planner::Workload wl;
    wl.batch = std::max(1, opts.n_batch);
    const int shared = opts.kv_positions > 0 ? opts.kv_positions : opts.n_ctx;
    const int ctx = std::max(2, std::min(opts.n_ctx, shared / wl.batch));
    wl.gen_len = opts.n_predict > 0 ? std::min(opts.n_predict, ctx - 1) : std::min(128, ctx / 2);
    wl.prompt_len = opts.n_prompt > 0 ? std::min(opts.n_prompt, ctx - wl.gen_len) : ctx - wl.gen_len;
    wl.kv_len = ctx;  // the KV cache holds the whole context whatever the prompt
    return wl;
}

void choose_plan(Placement& p, const ResidencyInput& in, const planner::Workload& wl, const PlacementOptions& opts,
                 const std::function<void(planner::PlannerOptions&, const planner::ModelShape&)>& tune) {
    if (opts.given) {
        opts.given->check_matches(p.shape);
        p.plan = *opts.given;
        return;
    }
    // Layers as the runtime holds and reads them: page-aligned ranges of the file.
    planner::ModelShape as_read = p.shape;
    for (size_t il = 0; il < as_read.layers.size() && il < in.layer_bytes.size(); ++il)
        as_read.layers[il].weight_bytes = in.layer_bytes[il];
    planner::PlannerOptions po;
    po.budgets = planner::default_budgets(p.hw);
    po.kv_types = {p.shape.kv_type};
    po.allow_recompute = false;
    po.limits.layers_only_on_nvme = true;
    // Streamed layers priced as the ring reads them, with its slots' reads in flight.
    const planner::RuntimeLimits ring = run_limits(in.prefetch_depth, p.shape, p.shape.kv_type, p.hw.nvme);
    po.limits.stream_slots = ring.stream_slots;
    po.limits.stream_inflight_bytes = ring.stream_inflight_bytes;
    po.max_micro = 1;  // the runtime runs a batch's sequences in one pass, never in micro-batches
    po.infeasible_hint = "give more --dram, or a shorter --ctx";
    tune(po, as_read);
    const planner::SearchResult r = planner::search_plans(as_read, p.hw, wl, po);
    p.plan = r.best;
    p.plan.model_weight_bytes = p.shape.total_weight_bytes();  // the identity `--plan` checks
    p.search = {r.n_policies, r.seconds};
}

Placement place(const models::GgufFile& file, const ResidencyInput& in, const PlacementOptions& opts) {
    Placement p;
    // The layers the engine runs (EngineOptions::n_layers may cut the model short).
    p.shape = planner::ModelShape::from_gguf(file).first_layers(static_cast<int32_t>(in.layer_bytes.size()));
    p.shape.kv_type = opts.kv_type;
    p.hw = runtime_profile(p.hw_source, opts.n_threads);
    if (opts.time_model_file && may_stream(in, opts.given)) measure_model_file_reads(p.hw.nvme, file.path());
    const planner::Workload wl = runtime_workload(opts);
    const OverrideRequest overrides = resolve_overrides(opts.overrides, file);
    if (p.shape.n_expert > 0)
        p.routing = planner::load_routing_profile(file.path(), file.file_size(), p.shape.n_layer, p.shape.n_expert,
                                                  &p.routing_note);
    const std::vector<bool> offloaded = offloaded_layers(in, overrides);
    if (!opts.given && std::find(offloaded.begin(), offloaded.end(), true) != offloaded.end())
        plan_expert_offload(p, in, wl, offloaded);
    else
        choose_plan(p, in, wl, opts, [&](planner::PlannerOptions& po, const planner::ModelShape& as_read) {
            po.budgets.dram = planner_budget(in, as_read, p.hw, wl);
        });
    p.plan.policy.kv_type = opts.kv_type;  // a given plan may name another; the cache's type is what runs
    // And the run's batch, in one pass: a given plan's batch and micro-batches are its workload's.
    p.plan.policy.batch = wl.batch;
    p.plan.policy.n_micro = 1;
    ResidencyInput unbounded = in;
    unbounded.budget = 0;
    p.residency = residency_from_plan(p.plan, unbounded);  // refuses what this runtime cannot run
    p.n_kv_layers_in_dram = std::min(opts.n_kv_layers_in_dram, p.shape.n_layer);
    p.prefetch_depth = in.prefetch_depth;
    const planner::Plan run = as_run(p.plan, opts.kv_type, p.n_kv_layers_in_dram);
    // What the plan puts elsewhere than this runtime holds it (KV the runtime spills for its
    // budget is its own choice, logged by the cache).
    bool moved = run.output != p.plan.output || run.embedding != p.plan.embedding;
    for (size_t il = 0; il < run.layers.size(); ++il) {
        const planner::Tier planned = planner::tier_of(p.plan.layers[il].kv);
        moved |= planned != planner::Tier::Dram && planned != planner::tier_of(run.layers[il].kv);
    }
    if (moved)
        STRATA_LOG_WARN("placement: the plan puts the output layer, embeddings or KV cache on NVMe or on the GPU; "
                        "this runtime keeps them in DRAM");
    // The KV layers the cache spills for the budget are shown where they run, as they are priced
    // (the plan as placed, KV in DRAM, is what the residency reads: the cache spills on its own terms).
    const planner::Plan placed = p.plan;
    for (auto& l : p.plan.layers)
        if (l.layer >= p.n_kv_layers_in_dram && l.kv == planner::KvOption::Dram) l.kv = planner::KvOption::Nvme;
    // Priced on this machine for this run as the runtime runs it, given or made alike.
    p.plan.workload = wl;
    p.limits = run_limits(in.prefetch_depth, p.shape, run.policy.kv_type, p.hw.nvme);
    p.plan.prediction = planner::evaluate_plan(p.shape, p.hw, wl, run, p.limits);
    // Memory as the runtime counts it, not as the cost model estimates it.
    p.plan.budgets.dram = static_cast<double>(in.budget ? in.budget : std::max(p.hw.dram.capacity_bytes, p.residency.total_bytes));
    p.plan.prediction.used.dram = static_cast<double>(p.residency.total_bytes);
    STRATA_LOG_INFO("{}{}", planner::plan_summary(p.plan), opts.given ? " (given)" : "");
    p.alternative = opts.alternative;
    if (opts.on_plan) opts.on_plan(p);
    p.residency = residency_from_plan(placed, in);
    p.residency.experts.policy = opts.expert_policy;
    if (p.routing) p.residency.experts.seed_counts = p.routing->counts;
    std::vector<bool> streamed(p.residency.resident.size());
    for (size_t il = 0; il < streamed.size(); ++il) streamed[il] = p.residency.streamed(static_cast<int>(il));
    check_resident_overrides(overrides, streamed, in.budget);
    return p;
}

}  // namespace strata::runtime
