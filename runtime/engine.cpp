#include "runtime/engine.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "core/model_paths.h"
#include "core/trace.h"
#include "cpu/onednn_matmul.h"
#include "cpu/thread_pool.h"
#include "gpu/cuda_host.h"
#include "gpu/device.h"
#include "runtime/exec/device_backend.h"
#include "runtime/exec/device_experts.h"
#include "runtime/exec/forward.h"
#include "runtime/grammar/grammar_constraint.h"
#include "runtime/grammar/token_trie.h"
#include "runtime/kv/kv_cache.h"
#include "planner/expert_placement.h"
#include "planner/routing_profile.h"
#include "runtime/place/expert_offload.h"
#include "runtime/place/gpu_placement.h"
#include "runtime/place/placement.h"
#include "runtime/text_stream.h"
#include "runtime/weights/expert_cache.h"
#include "runtime/weights/weight_store.h"
#include "storage/budget.h"

namespace strata::runtime {

namespace {

// KV layers that stay in DRAM: all of them when they fit next to the smallest weight
// footprint (head, embeddings, the streaming ring); otherwise the last layers spill to disk
// through a ring of their own.
int kv_layers_in_dram(const ResidencyInput& in, uint64_t kv_layer, int n_layer, uint64_t kv_all) {
    const uint64_t weights_floor = least_weight_bytes(in) + (in.other_bytes - kv_all);
    if (in.budget == 0 || weights_floor + kv_all <= in.budget) return n_layer;
    const uint64_t kv_ring = ring_bytes(kv_layer, std::min(n_layer, std::max(1, in.prefetch_depth + 1)));
    check_min_budget(in, weights_floor + kv_ring);
    return static_cast<int>(std::min<uint64_t>(n_layer - 1, (in.budget - weights_floor - kv_ring) / kv_layer));
}

// The KV cache's size as the engine holds it.
struct KvSize {
    int32_t n_blocks = 0;
    uint64_t layer_bytes = 0;   // one layer's keys and values
    uint64_t all_bytes = 0;     // every layer's; rebuilt layers keep hidden states and share one K/V layer
    std::vector<bool> rebuilt;  // per layer, from a given plan (empty: none)
    int n_rebuilt = 0;
};

KvSize kv_size(const models::Hparams& hp, const EngineOptions& opts, int n_ctx) {
    KvSize kv;
    kv.n_blocks = KvCache::blocks_for(opts.kv_positions > 0 ? opts.kv_positions : n_ctx);
    kv.layer_bytes = KvCache::layer_bytes(kv.n_blocks, hp.n_embd_kv(), opts.kv_type);
    // Layers whose KV a given plan recomputes keep hidden states (on the CPU) and share one
    // K/V slot; their saved rows and the slot stay in DRAM.
    if (opts.plan) kv.rebuilt = rebuilt_layers(*opts.plan);
    kv.n_rebuilt = static_cast<int>(std::count(kv.rebuilt.begin(), kv.rebuilt.end(), true));
    kv.all_bytes = kv.layer_bytes * (hp.n_layer - kv.n_rebuilt + (kv.n_rebuilt > 0)) +
                   kv.n_rebuilt * KvCache::hidden_layer_bytes(kv.n_blocks, hp.n_embd, opts.kv_type);
    return kv;
}

// A KV cache kept in DRAM whose layers from `n_resident` on spill to disk through a ring, and
// whose evicted prefix-cache blocks go to disk too when every layer is resident.
KvSpillOptions host_kv_spill(int n_resident, const EngineOptions& opts, const KvSize& kv, storage::MemoryBudget& dram) {
    KvSpillOptions spill;
    spill.n_resident_layers = n_resident;
    spill.dir = opts.kv_spill_dir.empty() ? cache_dir() / "kv-spill" : opts.kv_spill_dir;
    spill.prefetch_depth = opts.prefetch_depth;
    spill.budget = &dram;
    spill.prefix_spill_bytes = opts.prefix_spill_bytes.value_or(4 * kv.all_bytes);
    return spill;
}

// What the engine holds where: the KV cache and the placement of the weights.
struct Layout {
    std::unique_ptr<KvCache> kv;
    std::unique_ptr<Placement> placement;
    KvPlacement kv_on = KvPlacement::HostCpuAttention;
};

uint64_t head_bytes(const ModelWeights& w, const models::Hparams& hp) {
    return row_bytes(w.output.type, hp.n_embd) * uint64_t(w.output.n_rows);
}

// With a device: its bytes for layers and KV are the budget less the backend's working set
// (sized for the largest layer as a streaming buffer, plus the K/V layer that recomputed
// layers share); KV on the device takes no DRAM, so the host cache is then never written. KV
// the plan keeps in DRAM spills its last layers to disk when DRAM cannot hold it all.
Layout layout_with_gpu(const models::GgufFile& file, const models::Hparams& hp, ResidencyInput in,
                       const PlacementOptions& po, const GpuTarget& gpu, const gpu::Device& device,
                       const EngineOptions& opts, const KvSize& kv, storage::MemoryBudget& dram) {
    const uint64_t head = head_bytes(ModelWeights::bind(file, hp), hp);
    const uint64_t largest = *std::max_element(in.layer_bytes.begin(), in.layer_bytes.end());
    // The K/V layer that recomputed layers share: the plan may choose recompute.
    const uint64_t working = DeviceBackend::working_bytes(device, hp, head, largest, 2, po.n_ctx) + kv.layer_bytes;
    if (working >= gpu.gpu_mem)
        throw OutOfBudget(fmt::format("--gpu-mem {} is too small: activations, the output head and two layer "
                                      "buffers take {}", format_bytes(gpu.gpu_mem), format_bytes(working)),
                          "give more with --gpu-mem, or run on the CPU with --gpu-mem 0");
    const int n_kv_dram = kv_layers_in_dram(in, kv.layer_bytes, hp.n_layer, kv.all_bytes);
    ResidencyInput host_kv = in;  // DRAM as it is with the KV cache on the host
    if (n_kv_dram < hp.n_layer) {
        host_kv.other_bytes -= uint64_t(hp.n_layer - n_kv_dram) * kv.layer_bytes;
        if (host_kv.budget)
            host_kv.budget -= ring_bytes(kv.layer_bytes, std::min(hp.n_layer - n_kv_dram, opts.prefetch_depth + 1));
    }
    PlacementOptions host_po = po;
    host_po.n_kv_layers_in_dram = n_kv_dram;
    GpuPlacement g = place_on_gpu(file, host_kv, host_po, gpu, gpu.gpu_mem - working, opts.kv_type, opts.gpu.attention);
    // The plan (given or made) says which layers recompute their KV.
    const std::vector<bool> rebuilt = rebuilt_layers(g.placement.plan);
    const bool recompute = std::find(rebuilt.begin(), rebuilt.end(), true) != rebuilt.end();
    KvSpillOptions spill = host_kv_spill(g.kv == KvPlacement::Device ? hp.n_layer : n_kv_dram, opts, kv, dram);
    if (g.kv == KvPlacement::Device) spill.prefix_spill_bytes = 0;  // the host cache is not the master copy
    if (recompute && g.kv == KvPlacement::Device) {
        spill.rebuilt = rebuilt;
        spill.n_embd_hidden = hp.n_embd;
    } else if (recompute) {
        STRATA_LOG_WARN("gpu: the plan recomputes KV, which the device backend does with the KV cache on the "
                        "device only; this run keeps K and V ({})", kv_placement_name(g.kv));
    }
    Layout out;
    out.kv = std::make_unique<KvCache>(hp.n_layer, po.n_ctx, hp.n_embd_kv(), spill, kv.n_blocks, opts.kv_type);
    out.placement = std::make_unique<Placement>(std::move(g.placement));
    out.kv_on = g.kv;
    if (g.kv == KvPlacement::Device) {
        in.other_bytes -= kv.all_bytes;
        out.placement->residency = residency_from_plan(out.placement->plan, in, true);
    }
    return out;
}

// On the CPU: the KV cache in DRAM, or its last layers spilled when even streaming every
// weight leaves too little room; then the planner decides which weight layers stay resident.
Layout layout_on_cpu(const models::GgufFile& file, const models::Hparams& hp, ResidencyInput in, PlacementOptions po,
                     const EngineOptions& opts, const KvSize& kv, storage::MemoryBudget& dram) {
    KvSpillOptions spill = host_kv_spill(kv_layers_in_dram(in, kv.layer_bytes, hp.n_layer, kv.all_bytes), opts, kv, dram);
    if (kv.n_rebuilt > 0 && spill.n_resident_layers < hp.n_layer)
        throw OutOfBudget(fmt::format("the plan recomputes {} KV layers from saved hidden states, which stay in "
                                      "DRAM, but the KV cache does not fit --dram {}",
                                      kv.n_rebuilt, format_bytes(in.budget)),
                          "give more --dram, or use a plan without recompute (strata plan --no-recompute)");
    spill.rebuilt = kv.rebuilt;
    spill.n_embd_hidden = hp.n_embd;
    Layout out;
    out.kv = std::make_unique<KvCache>(hp.n_layer, po.n_ctx, hp.n_embd_kv(), spill, kv.n_blocks, opts.kv_type);
    // The spill ring is charged to the budget by its pool; only resident KV stays in other_bytes.
    in.other_bytes = in.other_bytes - kv.all_bytes + out.kv->bytes();
    if (in.budget) in.budget -= out.kv->spill_buffer_bytes();
    po.n_kv_layers_in_dram = spill.n_resident_layers;  // the prediction prices the spilled KV reads
    out.placement = std::make_unique<Placement>(place(file, in, po));
    return out;
}

// A mixture of experts with a device: every layer's attention on the device, its feed-forward
// on the host (runtime/exec/device_moe.cpp), the weights held as the CPU holds them (experts
// resident, or read through the expert cache when DRAM is short). The KV cache goes on the
// device when it fits beside the attention weights and the backend's working set, else it
// stays in DRAM and the CPU attends (not with --attention gpu).
Layout layout_moe_with_gpu(const models::GgufFile& file, const models::Hparams& hp, ResidencyInput in,
                           const PlacementOptions& po, const GpuTarget& gpu, const gpu::Device& device,
                           const EngineOptions& opts, const KvSize& kv, storage::MemoryBudget& dram) {
    if (po.given && po.given->has_gpu)
        throw UsageError("--plan: a mixture of experts on the device runs by the CPU's plan for its experts (the "
                         "device takes every layer's attention); this plan places layers on a GPU",
                         "leave --plan out, or give a plan made without a GPU (`strata plan -m MODEL --dram ...`)");
    const ModelWeights w = ModelWeights::bind(file, hp);
    const uint64_t fixed = DeviceBackend::working_bytes(device, hp, head_bytes(w, hp), 0, 0, po.n_ctx) +
                           DeviceBackend::attention_bytes(w);
    if (fixed >= gpu.gpu_mem)
        throw OutOfBudget(fmt::format("--gpu-mem {} is too small: the attention weights, the output head and "
                                      "activations take {}", format_bytes(gpu.gpu_mem), format_bytes(fixed)),
                          "give more with --gpu-mem, or run on the CPU with --gpu-mem 0");
    const bool kv_fits = fixed + kv.all_bytes <= gpu.gpu_mem;
    if (!kv_fits && opts.gpu.attention == AttentionChoice::Gpu)
        throw OutOfBudget(fmt::format("--gpu-mem {} holds the attention weights and activations ({}) but not the KV "
                                      "cache ({}) beside them", format_bytes(gpu.gpu_mem), format_bytes(fixed),
                                      format_bytes(kv.all_bytes)),
                          "give more with --gpu-mem or a shorter --ctx, or leave --attention out to attend on the CPU");
    // Routed experts the device may hold: SwiGLU experts in a type its kernels read.
    const bool experts_fit_device = hp.ffn_act == models::FfnAct::Silu && device.supports_weight(w.layers[0].ffn_up_exps.type);
    const OverrideRequest overrides = resolve_overrides(po.overrides, file);
    if (asks_device(overrides) && !experts_fit_device)
        throw UsageError(fmt::format("--override-tensor gives routed experts to {}, whose kernels do not run these {} "
                                     "experts", device.name(), dtype_name(w.layers[0].ffn_up_exps.type)),
                         "keep them on the host: --override-tensor exps=dram");
    Layout out;
    in.other_bytes += DeviceBackend::staging_bytes(hp, po.n_ctx) + (experts_fit_device ? DeviceExperts::staging_bytes(hp) : 0);
    PlacementOptions host_po = po;
    host_po.on_plan = nullptr;  // shown below, once the plan has the device in it
    const bool kv_on_device = kv_fits && opts.gpu.attention != AttentionChoice::Cpu;
    if (kv_on_device) {
        KvSpillOptions spill = host_kv_spill(hp.n_layer, opts, kv, dram);
        spill.prefix_spill_bytes = 0;  // the host cache is not the master copy
        out.kv = std::make_unique<KvCache>(hp.n_layer, po.n_ctx, hp.n_embd_kv(), spill, kv.n_blocks, opts.kv_type);
        in.other_bytes -= kv.all_bytes;
        out.placement = std::make_unique<Placement>(place(file, in, host_po));
    } else {
        out = layout_on_cpu(file, hp, in, host_po, opts, kv, dram);
    }
    out.kv_on = kv_on_device ? KvPlacement::Device : KvPlacement::HostCpuAttention;
    // The plan as the device runs it, priced on the device's profile.
    Placement& p = *out.placement;
    p.hw = gpu.hw;
    p.hw_source = "this machine's GPU and " + std::string(p.hw.source);
    p.plan.budgets.gpu = static_cast<double>(gpu.gpu_mem);
    p.plan = planner::with_attention_on_gpu(std::move(p.plan), p.shape, p.hw, kv_on_device);
    // The device memory left beside the attention, the KV cache and activations holds experts.
    const uint64_t taken = fixed + (kv_on_device ? kv.all_bytes : 0) + DeviceExperts::scratch_bytes(hp);
    if (experts_fit_device && taken < gpu.gpu_mem) {
        uint64_t each = 0;
        for (const LayerWeights& l : w.layers) each = std::max(each, DeviceExperts::expert_bytes(l));
        STRATA_LOG_INFO("experts: {} of device memory left beside attention, the KV cache and activations: room for {} "
                        "routed experts of {}", format_bytes(gpu.gpu_mem - taken), (gpu.gpu_mem - taken) / each,
                        format_bytes(each));
        place_experts_on_device(p, overrides, gpu.gpu_mem - taken, each);
    } else if (asks_device(overrides)) {
        throw OutOfBudget(fmt::format("--gpu-mem {} leaves no room for routed experts beside the attention weights, the "
                                      "KV cache and activations ({})", format_bytes(gpu.gpu_mem), format_bytes(taken)),
                          "give more with --gpu-mem, or leave the experts on the host");
    }
    STRATA_LOG_INFO("{}; KV cache: {}", planner::plan_summary(p.plan), kv_placement_name(out.kv_on));
    if (po.on_plan) po.on_plan(p);
    return out;
}

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// llama.cpp's enum llama_pooling_type: 1 mean, 2 cls (the first token), 3 last; a decoder LM
// names none and pools its last token.
Pooling pooling_from_gguf(const models::GgufFile& f) {
    const std::string arch = f.get_string("general.architecture");
    switch (f.get_int_opt(arch + ".pooling_type").value_or(3)) {
        case 1: return Pooling::Mean;
        case 2: return Pooling::First;
        default: return Pooling::Last;
    }
}
// The host's threads: as asked, else every core, or with the simulated device the cores its
// own threads leave (the host's waiting threads would otherwise take turns with the device's).
int host_threads(const EngineOptions& o) {
    if (o.n_threads > 0 || o.gpu.device != DeviceKind::Sim) return o.n_threads;
    return std::max(1, cpu::default_thread_count() - sim_thread_count(o.gpu));
}
}  // namespace

Engine::Engine(const EngineOptions& opts)
    : file_(models::GgufFile::open(resolve_model_path(opts.model))),
      hp_(models::Hparams::from_gguf(file_)),
      tok_(models::Tokenizer::from_gguf(file_)),
      pool_(std::make_unique<cpu::ThreadPool>(host_threads(opts))),
      dram_(std::make_unique<storage::MemoryBudget>("DRAM", opts.dram_budget ? opts.dram_budget : UINT64_MAX,
                                                    "--dram")) {
    if (opts.n_ctx < 0) throw UsageError(fmt::format("context size {} is negative", opts.n_ctx));
    pooling_ = pooling_from_gguf(file_);
    if (opts.bf16_prefill) cpu::set_bf16_prefill(true);
    if (opts.prefetch_depth < 1) throw UsageError(fmt::format("--prefetch {} must be at least 1", opts.prefetch_depth));
    const int n_ctx = context_size(opts.n_ctx, hp_.n_ctx_train);
    if (!opts.trace_path.empty()) trace_ = std::make_unique<Trace>(opts.trace_path);
    // What the forward pass holds besides weights: the KV cache, activations and one row of logits.
    const uint64_t activations = Forward::activation_bytes(hp_) + uint64_t(hp_.n_vocab) * sizeof(float);
    if (opts.kv_positions < 0) throw UsageError(fmt::format("KV cache size {} is negative", opts.kv_positions));
    const KvSize kv = kv_size(hp_, opts, n_ctx);
    // The GPU, when there is one to use: the planner places layers and KV on it.
    const GpuTarget gpu = find_gpu(opts.gpu, file_, hp_, opts.kv_type, pool_->n_threads());
    const bool asked = opts.gpu.device == DeviceKind::Sim || opts.gpu.device == DeviceKind::Cuda ||
                       (opts.gpu.device == DeviceKind::Auto && (opts.gpu.gpu_mem || opts.gpu.attention != AttentionChoice::Auto));
    if (!gpu.use && asked)
        STRATA_LOG_WARN("gpu: not used ({}); running on the CPU", gpu.why_not);
    else if (!gpu.use)
        STRATA_LOG_INFO("gpu: none ({}); running on the CPU", gpu.why_not);
    if (gpu.use && gpu.kind == DeviceKind::Cuda) gpu::install_cuda_host_pinner();
    if (!gpu.use && asks_device(resolve_overrides(opts.overrides, file_)))
        throw UsageError(fmt::format("--override-tensor gives routed experts to the device, but none is in use ({})",
                                     gpu.why_not),
                         "run on a device (--device cuda, or --device sim to try it), or place them in dram or nvme");
    PlacementOptions po;
    po.given = opts.plan ? &*opts.plan : nullptr;
    po.n_ctx = n_ctx;
    po.n_predict = opts.n_predict;
    po.n_threads = pool_->n_threads();
    po.kv_type = opts.kv_type;
    po.on_plan = opts.on_plan;
    po.overrides = opts.overrides;
    po.expert_policy = opts.expert_policy;
    // The layers' sizes as the store reads them; then the KV cache and the placement of the
    // weights (the planner's); then the weights, held as placed.
    const ResidencyInput in =
        WeightStore::residency_input(file_, hp_, *dram_, kv.all_bytes + activations, opts.prefetch_depth);
    std::unique_ptr<gpu::Device> device = gpu.use ? open_device(gpu, opts.gpu, opts.int8_activations) : nullptr;
    Layout layout = !gpu.use          ? layout_on_cpu(file_, hp_, in, po, opts, kv, *dram_)
                    : hp_.moe.enabled() ? layout_moe_with_gpu(file_, hp_, in, po, gpu, *device, opts, kv, *dram_)
                                        : layout_with_gpu(file_, hp_, in, po, gpu, *device, opts, kv, *dram_);
    kv_ = std::move(layout.kv);
    placement_ = std::move(layout.placement);
    const KvPlacement kv_on = layout.kv_on;
    weights_ = std::make_unique<WeightStore>(file_, hp_, *dram_, placement_->residency);
    // KV on the device takes no DRAM but for the layers the plan runs on the CPU, which also
    // hold a second set of activations.
    const auto& on_cpu = placement_->residency.on_cpu;
    const auto n_cpu = static_cast<uint64_t>(std::count(on_cpu.begin(), on_cpu.end(), true));
    const bool kv_on_device = gpu.use && kv_on == KvPlacement::Device;
    const uint64_t working = (kv_on_device ? kv_->bytes() * n_cpu / uint64_t(hp_.n_layer) : kv_->bytes()) + activations +
                             (n_cpu > 0 ? Forward::activation_bytes(hp_) : 0);
    working_ = storage::Reservation(*dram_, working, "KV cache and activations");
    auto tile_for_cpu = [&](const std::vector<bool>* only_layers) {
        if (!opts.tile_weights) return;
        const auto t0 = Clock::now();
        uint64_t tiled = 0;
        pool_->run([&] { tiled = weights_->tile_for_cpu(only_layers); });
        if (tiled)
            STRATA_LOG_INFO("weights: {} rewritten into the AVX-512 kernels' tile order in {:.0f} ms",
                            format_bytes(tiled), 1000 * seconds_since(t0));
    };
    if (gpu.use) {
        DeviceBackendOptions co;
        co.kv = kv_on;
        co.int8_activations = opts.int8_activations;
        co.experts = placement_->plan.experts.device;
        fwd_ = std::make_unique<DeviceBackend>(std::move(device), hp_, *weights_, *kv_, *dram_, co);
        // What runs on the host in the CPU's tile order, once the device has its copies: a
        // mixture of experts' feed-forward (every resident layer), else the plan's CPU layers.
        tile_for_cpu(hp_.moe.enabled() ? nullptr : &on_cpu);
    } else {
        tile_for_cpu(nullptr);
        auto cpu = std::make_unique<Forward>(hp_, *weights_);
        cpu->set_int8_activations(opts.int8_activations);
        fwd_ = std::move(cpu);
    }
    weights_->set_trace(trace_.get());
    kv_->set_trace(trace_.get());
    fwd_->set_trace(trace_.get());
    const std::string experts = hp_.moe.enabled() ? fmt::format(", {} experts ({} per token)", hp_.moe.n_expert, hp_.moe.n_expert_used) : "";
    STRATA_LOG_INFO("model {}: {} layers, {} embd, {} heads ({} kv){}, {} of weights, context {}, KV cache {} blocks of {} "
                    "positions ({}), {} threads; {}",
                    models::arch_name(hp_.arch), hp_.n_layer, hp_.n_embd, hp_.n_head, hp_.n_head_kv, experts,
                    format_bytes(weights_->weights().total_bytes()), n_ctx, kv.n_blocks, KvCache::kBlockSize,
                    format_bytes(kv.all_bytes), pool_->n_threads(),
                    opts.dram_budget ? dram_->describe() : std::string("no DRAM limit"));
    if (kv_->n_rebuilt() > 0)
        STRATA_LOG_INFO("kv: {} layers keep hidden states and rebuild K and V each pass (the plan's recompute)",
                        kv_->n_rebuilt());
}

Engine::~Engine() = default;

std::filesystem::path Engine::save_routing_stats() const {
    const RoutingStats* s = routing_stats();
    if (!s || hp_.moe.n_expert_used <= 0) return {};
    planner::RoutingProfile run;
    run.model = file_.path().filename().string();
    run.model_bytes = file_.file_size();
    run.counts = s->snapshot();
    uint64_t choices = 0;
    for (uint64_t c : run.counts.at(0)) choices += c;
    run.tokens = choices / static_cast<uint64_t>(hp_.moe.n_expert_used);
    if (run.tokens == 0) return {};
    if (const ExpertCache* cache = weights().expert_cache()) {
        const ExpertCacheStats st = cache->stats();
        run.observe({cache->held_share(), st.decode_hits, st.decode_hits + st.decode_misses});
    }
    try {
        const auto path = planner::save_routing_profile(file_.path(), std::move(run));
        STRATA_LOG_INFO("experts: routing statistics of {} tokens added to {}", choices / hp_.moe.n_expert_used, path.string());
        return path;
    } catch (const IoError& e) {
        STRATA_LOG_WARN("experts: {} ({})", e.what(), e.hint());
        return {};
    }
}

int Engine::n_ctx() const { return kv_->n_ctx(); }

const TokenTrie& Engine::token_trie() const {
    std::call_once(trie_once_, [this] { trie_ = std::make_unique<TokenTrie>(*tok_); });
    return *trie_;
}

std::unique_ptr<Sampler> Engine::make_sampler(const GenerateParams& params) const {
    if (!params.grammar) return std::make_unique<Sampler>(params.sampler);
    return std::make_unique<Sampler>(params.sampler,
                                     std::make_unique<GrammarConstraint>(params.grammar, token_trie(), params.grammar_triggers));
}
int Engine::n_past() const { return kv_->n_past(); }
int Engine::n_threads() const { return pool_->n_threads(); }
void Engine::reset() { kv_->truncate(0); }

void Engine::truncate(int n) {
    const auto held = kv_->seq_tokens(0);
    const std::vector<int32_t> tokens(held.begin(), held.begin() + std::clamp<int>(n, 0, static_cast<int>(held.size())));
    // Position n may fall in a block another sequence shares: it is recomputed, not written.
    const int kept = kv_->truncate_seq(0, n);
    if (kept < static_cast<int>(tokens.size())) eval(std::span(tokens).subspan(kept));
}

std::span<const float> Engine::eval(std::span<const int32_t> tokens, bool all_logits) {
    pool_->run([&] { fwd_->eval(tokens, *kv_, logits_, all_logits); });
    return logits_;
}

SeqId Engine::create_seq() { return kv_->create_seq(); }
void Engine::free_seq(SeqId seq) { kv_->free_seq(seq); }
int Engine::attach_prefix(SeqId seq, std::span<const int32_t> tokens) { return kv_->attach_prefix(seq, tokens); }

std::span<const float> Engine::eval_batch(std::span<const SeqTokens> batch) {
    for (const SeqTokens& e : batch)
        if (!kv_->reserve(e.seq, static_cast<int32_t>(e.tokens.size())))
            throw OutOfBudget(fmt::format("KV cache full: {} of {} blocks in use", kv_->pool().n_used(), kv_->pool().n_blocks()),
                              "run fewer sequences at once, or give the cache more room (--ctx, --dram)");
    // One row of logits is part of the activations; a batch's rows (and the pass's copy of
    // them) are charged once they exist. The placement did not know the batch size, so a
    // budget without room for them is reported once rather than failing the requests.
    const uint64_t extra = 2 * (batch.size() > 0 ? batch.size() - 1 : 0) * uint64_t(hp_.n_vocab) * sizeof(float);
    if (extra > batch_logits_.bytes()) {
        batch_logits_.reset();
        try {
            batch_logits_ = storage::Reservation(*dram_, extra, "logits of a batch");
        } catch (const OutOfBudget& e) {
            if (!warned_logits_) STRATA_LOG_WARN("batch: {}; running over the budget by that much", e.what());
            warned_logits_ = true;
        }
    }
    pool_->run([&] { fwd_->eval_batch(batch, *kv_, logits_, hidden_); });
    return logits_;
}

GenerateResult Engine::generate(std::span<const int32_t> prompt, const GenerateParams& params,
                                const std::function<bool(std::string_view)>& on_text) {
    GenerateResult r;
    r.prompt_tokens.assign(prompt.begin(), prompt.end());
    if (prompt.empty()) throw UsageError("the prompt is empty", "give some text with -p or on standard input");
    if (params.n_predict < 0) throw UsageError(fmt::format("-n {} is negative", params.n_predict));
    const int64_t needed = static_cast<int64_t>(n_past()) + static_cast<int64_t>(prompt.size());
    if (needed >= n_ctx())
        throw UsageError(fmt::format("the prompt has {} tokens, but the context holds {} ({} already used)",
                                     prompt.size(), n_ctx(), n_past()),
                         "shorten the prompt or raise --ctx");

    const std::unique_ptr<Sampler> sampler = make_sampler(params);
    for (int32_t t : prompt) sampler->accept(t);
    TextStream stream(params.stop);
    auto emit = [&](const std::string& s) { return s.empty() || !on_text || on_text(s); };

    auto t0 = Clock::now();
    std::span<const float> logits = eval(prompt);
    r.prefill_seconds = seconds_since(t0);

    r.stop_reason = "length";
    t0 = Clock::now();
    for (int i = 0; i < params.n_predict; ++i) {
        const int32_t tok = sampler->sample(logits.subspan(0, hp_.n_vocab));
        if (tok < 0) {
            r.stop_reason = "error";
            r.error = kGrammarDeadEnd;
            break;
        }
        // A grammar's end is the end: its output is whole.
        if ((!params.ignore_eos || params.grammar) && tok_->is_eog(tok)) {
            r.stop_reason = "eos";
            break;
        }
        r.tokens.push_back(tok);
        sampler->accept_generated(tok);
        const bool keep_going = emit(stream.push(tok_->piece(tok)));
        if (stream.stopped()) {
            r.stop_reason = "stop";
            break;
        }
        if (!keep_going) {
            r.stop_reason = "cancelled";
            break;
        }
        if (i + 1 == params.n_predict) break;
        if (n_past() >= n_ctx()) {
            r.stop_reason = "context";
            break;
        }
        logits = eval({&tok, 1});
        ++r.n_decode_evals;
    }
    r.decode_seconds = seconds_since(t0);
    if (!stream.stopped()) emit(stream.flush());
    r.text = stream.text();
    return r;
}

}  // namespace strata::runtime
