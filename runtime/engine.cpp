#include "runtime/engine.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "core/bytes.h"
#include "core/error.h"
#include "core/log.h"
#include "core/model_paths.h"
#include "core/trace.h"
#include "cpu/onednn_matmul.h"
#include "cpu/thread_pool.h"
#include "gpu/cuda_host.h"
#include "gpu/device.h"
#include "planner/routing_profile.h"
#include "runtime/exec/cpu/cpu_backend.h"
#include "runtime/exec/device/device_backend.h"
#include "runtime/grammar/grammar_constraint.h"
#include "runtime/grammar/token_trie.h"
#include "planner/policy_search.h"
#include "runtime/host_memory.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/place/gpu_placement.h"
#include "runtime/place/placement.h"
#include "runtime/place/run_layout.h"
#include "runtime/spec/draft_engine.h"
#include "runtime/weights/expert_cache.h"
#include "runtime/weights/weight_store.h"
#include "storage/budget.h"

namespace strata::runtime {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// llama.cpp's enum llama_pooling_type: 0 none, 1 mean, 2 cls (the first token), 3 last, 4 rank;
// a decoder LM names none and pools its last token, as for 0.
Pooling pooling_from_gguf(const models::GgufFile& f) {
    const std::string arch = f.get_string("general.architecture");
    const int64_t type = f.get_int_opt(arch + ".pooling_type").value_or(3);
    switch (type) {
        case 1: return Pooling::Mean;
        case 2: return Pooling::First;
        case 0:
        case 3: return Pooling::Last;
        default:
            STRATA_LOG_WARN("{}.pooling_type {} ({}) is not a pooling Strata has; embeddings pool the last token (--pooling "
                            "chooses another)",
                            arch, type, type == 4 ? "rank, a reranker's" : "unknown");
            return Pooling::Last;
    }
}

// One line on why no device runs the model: a warning when one was asked for.
void log_no_device(const GpuRequest& req, const GpuTarget& gpu) {
    const bool asked = req.device == DeviceKind::Sim || req.device == DeviceKind::Cuda ||
                       (req.device == DeviceKind::Auto && (req.gpu_mem || req.attention != AttentionChoice::Auto));
    if (asked) STRATA_LOG_WARN("gpu: not used ({}); running on the CPU", gpu.why_not);
    else STRATA_LOG_INFO("gpu: none ({}); running on the CPU", gpu.why_not);
}

// The model cut to its first n layers (n > 0), for a drafter that exits early.
models::Hparams first_layers(models::Hparams hp, int n) {
    if (n < 0 || n > hp.n_layer)
        throw UsageError(fmt::format("{} layers asked of a model of {}", n, hp.n_layer), "give 1 to the model's layers, or 0 for all");
    if (n > 0) hp.n_layer = n;
    return hp;
}

// What sizes an engine of `opts` on `hp`: its context, a pass's activations and logits (the
// batch's sequences and one sequence's drafts, Engine::max_logit_rows), and its KV cache.
struct Sizing {
    int n_ctx = 0;
    uint64_t activations = 0;
    KvSize kv;
};
Sizing sizing(const models::Hparams& hp, const EngineOptions& opts) {
    Sizing s;
    s.n_ctx = context_size(opts.n_ctx, hp.n_ctx_train);
    s.activations = host_activation_bytes(hp, planned_logit_rows(opts.n_batch, opts.decode_rows));
    s.kv = kv_size(hp, opts.kv_positions, s.n_ctx, opts.kv_type, opts.plan ? &*opts.plan : nullptr);
    return s;
}
}  // namespace

Engine::Extent Engine::extent(const EngineOptions& opts) {
    const auto file = models::GgufFile::open(resolve_model_path(opts.model));
    const models::Hparams hp = first_layers(models::Hparams::from_gguf(file), opts.n_layers);
    const Sizing s = sizing(hp, opts);
    const storage::MemoryBudget unlimited("DRAM", UINT64_MAX, "--dram");
    const ResidencyInput in = WeightStore::residency_input(file, hp, unlimited, s.kv.all_bytes + s.activations, opts.prefetch_depth);
    uint64_t all = in.fixed_bytes + in.other_bytes;
    for (const uint64_t b : in.layer_bytes) all += b;
    return {s.n_ctx, s.kv.n_blocks * KvCache::kBlockSize, all};
}

Engine::Engine(const EngineOptions& opts)
    : file_(models::GgufFile::open(resolve_model_path(opts.model))),
      hp_(first_layers(models::Hparams::from_gguf(file_), opts.n_layers)),
      tok_(models::Tokenizer::from_gguf(file_)),
      pool_(std::make_unique<cpu::ThreadPool>(host_thread_count(opts.gpu, opts.n_threads))),
      dram_(std::make_unique<storage::MemoryBudget>("DRAM", opts.dram_budget ? opts.dram_budget : UINT64_MAX,
                                                    "--dram")) {
    if (opts.n_ctx < 0) throw UsageError(fmt::format("context size {} is negative", opts.n_ctx));
    // Every token needs its row of the embeddings and the output head (llama.cpp refuses such a
    // file too): fewer tokens gave ids the tokenizer cannot decode, more failed mid-run.
    if (tok_->n_vocab() != hp_.n_vocab)
        throw FormatError(fmt::format("'{}' has {} tokens in its tokenizer but {} rows in token_embd.weight", file_.path().string(),
                                      tok_->n_vocab(), hp_.n_vocab),
                          "the file is damaged or was converted wrongly: download or convert it again");
    pooling_ = pooling_from_gguf(file_);
    if (opts.bf16_prefill) {
        cpu::set_bf16_prefill(true);
        if (!cpu::onednn_has_amx())
            STRATA_LOG_WARN("--bf16-prefill: oneDNN runs no AMX here (none on this CPU, or STRATA_AMX=0); prompts use the "
                            "default kernels");
    }
    if (opts.prefetch_depth < 1)
        throw UsageError(fmt::format("--prefetch {} must be at least 1", opts.prefetch_depth), "give the layers to read ahead: 1 or more (2 by default)");
    const int n_ctx = context_size(opts.n_ctx, hp_.n_ctx_train);
    if (hp_.n_ctx_train > 0 && n_ctx > hp_.n_ctx_train)
        STRATA_LOG_WARN("a context of {} positions is past the {} this model was trained on: text past {} may lose its way",
                        n_ctx, hp_.n_ctx_train, hp_.n_ctx_train);
    if (!opts.trace_path.empty()) trace_ = std::make_unique<Trace>(opts.trace_path);
    // What the forward pass holds besides weights: the KV cache, activations and one row of
    // logits, and the logits of the other sequences of the batch planned for (a row each, and
    // the pass's copy), so that the budget keeps room for them beside what it places.
    if (opts.n_batch < 1)
        throw UsageError(fmt::format("a batch of {} sequences to plan for", opts.n_batch), "give at least 1 sequence");
    if (opts.decode_rows < 1)
        throw UsageError(fmt::format("{} rows a decode pass to plan for", opts.decode_rows), "give at least 1 row");
    // The batch's sequences and one sequence's drafts; a pass keeps its drafts within them under
    // a budget (Scheduler::add_drafts, max_logit_rows).
    planned_logit_rows_ = planned_logit_rows(opts.n_batch, opts.decode_rows);
    planned_batch_logits_ = batch_logits_bytes(hp_, planned_logit_rows_);
    if (opts.kv_positions < 0) throw UsageError(fmt::format("KV cache size {} is negative", opts.kv_positions));
    const Sizing sized = sizing(hp_, opts);
    const uint64_t activations = sized.activations;
    const KvSize& kv = sized.kv;
    // The GPU, when there is one to use: the planner places layers and KV on it.
    GpuTarget gpu = find_gpu(opts.gpu, file_, hp_, opts.kv_type, pool_->n_threads());
    if (!gpu.use) log_no_device(opts.gpu, gpu);
    // Without a DRAM budget the KV cache is allocated whole in host memory: one larger than the
    // machine's memory is refused here, not by the allocator (with a budget it spills, or the
    // planner refuses the budget by its parts).
    if (!gpu.use && !opts.dram_budget && kv.all_bytes + activations > system_ram_bytes())
        throw UsageError(fmt::format("{} a KV cache of {}, more than this machine's {} of memory",
                                     opts.kv_positions > n_ctx
                                         ? fmt::format("{} positions (contexts of {}) need", opts.kv_positions, n_ctx)
                                         : fmt::format("a context of {} positions needs", n_ctx),
                                     format_bytes(kv.all_bytes), format_bytes(system_ram_bytes())),
                         "give " + opts.sized_by);
    if (gpu.use && gpu.kind == DeviceKind::Cuda) gpu::install_cuda_host_pinner();
    PlacementOptions po;
    po.given = opts.plan ? &*opts.plan : nullptr;
    po.n_ctx = n_ctx;
    po.n_predict = opts.n_predict;
    po.n_prompt = opts.n_prompt;
    if (!opts.prompt.empty()) po.n_prompt += static_cast<int>(tok_->encode(opts.prompt, tok_->add_bos_default(), true).size());
    po.n_batch = opts.n_batch;
    po.kv_positions = opts.kv_positions;
    po.n_threads = pool_->n_threads();
    po.n_threads_alone = opts.n_threads;
    po.kv_type = opts.kv_type;
    po.on_plan = opts.on_plan;
    po.overrides = opts.overrides;
    warn_unmatched_overrides(resolve_overrides(po.overrides, file_), file_);
    po.expert_policy = opts.expert_policy;
    LayoutOptions lo;
    lo.kv_type = opts.kv_type;
    lo.prefetch_depth = opts.prefetch_depth;
    lo.kv_spill_dir = opts.kv_spill_dir;
    lo.prefix_spill_bytes = opts.prefix_spill_bytes;
    lo.attention = opts.gpu.attention;
    lo.op_offload = opts.gpu.op_offload;
    lo.max_pass_rows = static_cast<int32_t>(Backend::kMaxUbatch);
    // The layers' sizes as the store reads them; then the KV cache and the placement of the
    // weights (the planner's); then the weights, held as placed.
    // The KV cache, activations and a drafting engine's share beside what the plan places.
    const uint64_t beside = opts.draft && opts.dram_budget ? draft_share(opts, *opts.draft) : 0;
    ResidencyInput in = WeightStore::residency_input(file_, hp_, *dram_, kv.all_bytes + activations + beside, opts.prefetch_depth);
    in.beside_bytes = beside;
    std::unique_ptr<gpu::Device> device = gpu.use ? open_device(gpu, opts.gpu, opts.int8_activations) : nullptr;
    std::optional<DeviceFootprint> footprint;
    if (device)
        footprint = DeviceBackend::footprint(*device, hp_, ModelWeights::bind(file_, hp_), n_ctx,
                                             *std::max_element(in.layer_bytes.begin(), in.layer_bytes.end()));
    RunLayout layout = lay_out(file_, hp_, in, po, lo, kv, *dram_, gpu, footprint ? &*footprint : nullptr);
    if (layout.cpu_alone_wins) {
        // The CPU alone, on every thread the device's would have left it, is predicted faster.
        if (layout.device_prediction) po.alternative = PlanAlternative{"the device", *layout.device_prediction};
        layout = RunLayout{};
        device.reset();
        gpu = GpuTarget{};
        gpu.why_not = "the CPU alone is predicted faster";
        const int alone = opts.n_threads > 0 ? opts.n_threads : cpu::default_thread_count();
        if (pool_->n_threads() != alone) pool_ = std::make_unique<cpu::ThreadPool>(alone);
        po.n_threads = pool_->n_threads();
        layout = lay_out(file_, hp_, in, po, lo, kv, *dram_, gpu, nullptr);
    }
    const uint64_t working =
        host_working_bytes(layout, gpu.use, activations);
    kv_ = std::move(layout.kv);
    placement_ = std::move(layout.placement);
    Residency residency = placement_->residency;
    residency.read_chunks = stream_read_chunks(placement_->hw.nvme);
    weights_ = std::make_unique<WeightStore>(file_, hp_, *dram_, std::move(residency));
    working_ = storage::Reservation(*dram_, working, "KV cache and activations");
    if (beside > 0) beside_ = storage::Reservation(*dram_, beside, "the drafting engine beside the model");
    make_backend(opts, layout.kv_on, std::move(device));
    weights_->set_trace(trace_.get());
    kv_->set_trace(trace_.get());
    backend_->set_trace(trace_.get());
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

void Engine::tile_for_cpu(const std::vector<bool>* only_layers) {
    if (!tile_weights_) return;
    const auto t0 = Clock::now();
    uint64_t tiled = 0;
    pool_->run([&] { tiled = weights_->tile_for_cpu(only_layers); });
    if (tiled)
        STRATA_LOG_INFO("weights: {} rewritten into the AVX-512 kernels' tile order in {:.0f} ms", format_bytes(tiled),
                        1000 * seconds_since(t0));
}

void Engine::use_cpu_backend() {
    tile_for_cpu(nullptr);
    auto cpu = std::make_unique<CpuBackend>(hp_, *weights_);
    cpu->set_int8_activations(int8_activations_);
    cpu_ = cpu.get();
    backend_ = std::move(cpu);
    kv_on_.reset();
}

void Engine::make_backend(const EngineOptions& opts, KvPlacement kv_on, std::unique_ptr<gpu::Device> device) {
    tile_weights_ = opts.tile_weights;
    int8_activations_ = opts.int8_activations;
    if (!device) return use_cpu_backend();
    DeviceBackendOptions co;
    co.kv = kv_on;
    co.int8_activations = opts.int8_activations;
    co.experts = placement_->plan.experts.device;
    co.op_offload_rows = placement_->op_offload_rows;
    co.graphs = opts.graphs;
    try {
        backend_ = std::make_unique<DeviceBackend>(std::move(device), hp_, *weights_, *kv_, *dram_, co);
        kv_on_ = kv_on;
    } catch (const DeviceOutOfMemory& e) {
        // The device's memory cannot hold what the plan put there (taken by another program
        // since it was measured): every layer on the CPU, read into DRAM (the host's KV cache
        // holds every layer already).
        STRATA_LOG_WARN("gpu: {}; running on the CPU", e.what());
        for (int il = 0; il < hp_.n_layer; ++il)
            if (weights_->residency().device(il)) weights_->run_on_cpu(il);
        if (kv_on == KvPlacement::Device) charge_kv_the_device_held();
        return use_cpu_backend();
    }
    // Op offload the device could not set up (it said why): the run is planned and priced without.
    if (placement_->op_offload_rows > 0 && !dynamic_cast<const DeviceBackend&>(*backend_).op_offloads()) {
        placement_->op_offload_rows = 0;
        placement_->op_offload_why = "not set up on the device (see the warning above)";
        placement_->plan.experts.op_offload_rows = 0;
        const planner::Workload& wl = placement_->plan.workload;
        placement_->plan.prediction = placement_->predict(wl.prompt_len, wl.gen_len, wl.batch);
    }
    // Resident block-quantized weights in the CPU kernels' tile order: the layers the host
    // computes (a mixture of experts' feed-forward, else the plan's CPU layers), once the device
    // has its copies.
    tile_for_cpu(hp_.moe.enabled() ? nullptr : &placement_->residency.on_cpu);
}
Engine::~Engine() = default;

void Engine::exit_after(int n_layers) {
    if (!cpu_) throw UsageError(fmt::format("the {} backend runs every layer of a pass", backend_->name()), "run the early-exit drafter on the CPU");
    if (n_layers < 0 || n_layers > hp_.n_layer)
        throw UsageError(fmt::format("an exit after layer {} of {}", n_layers, hp_.n_layer), "give 1 to the loaded layers, or 0 for all");
    cpu_->exit_after(n_layers > 0 ? n_layers : hp_.n_layer);
}

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
                                     std::make_unique<GrammarConstraint>(params.grammar, token_trie(), params.grammar_triggers,
                                                                         params.grammar_triggers_from));
}
int Engine::n_threads() const { return pool_->n_threads(); }

SeqId Engine::create_seq() { return kv_->create_seq(); }
void Engine::free_seq(SeqId seq) { kv_->free_seq(seq); }
int Engine::attach_prefix(SeqId seq, std::span<const int32_t> tokens) { return kv_->attach_prefix(seq, tokens); }
int Engine::unshare(SeqId seq) {
    backend_->copy_blocks(kv_->unshare(seq));
    return kv_->seq_len(seq);
}

void Engine::head_deferred(std::span<const int64_t> logit_rows) {
    pool_->run([&] { backend_->head_deferred(logit_rows, logits_); });
}

std::span<const float> Engine::eval_batch(std::span<const SeqTokens> batch) {
    for (const SeqTokens& e : batch)
        if (!kv_->reserve(e.seq, static_cast<int32_t>(e.kv_span())))
            throw OutOfBudget(fmt::format("KV cache full: {} of {} blocks in use", kv_->pool().n_used(), kv_->pool().n_blocks()),
                              "run fewer sequences at once, or give the cache more room (--ctx, --dram)");
    // One row of logits, and a row of each other sequence of the batch planned for, are part
    // of the activations; more rows (a larger batch, a verify pass's drafts) are charged once
    // they exist, and a budget without room for them is reported once rather than failing the
    // requests.
    uint64_t rows = 0;
    for (const SeqTokens& e : batch) rows += uint64_t(Backend::logit_rows(e));
    const uint64_t extra = 2 * (rows > 0 ? rows - 1 : 0) * uint64_t(hp_.n_vocab) * sizeof(float);
    const uint64_t beyond = extra > planned_batch_logits_ ? extra - planned_batch_logits_ : 0;
    if (beyond > batch_logits_.bytes()) {
        batch_logits_.reset();
        try {
            batch_logits_ = storage::Reservation(*dram_, beyond, "logits of a batch");
        } catch (const OutOfBudget& e) {
            if (!warned_logits_) STRATA_LOG_WARN("batch: {}; running over the budget by that much", e.what());
            warned_logits_ = true;
        }
    }
    // Priced again after a pass that made the device give layers or experts back, and after one
    // that then failed: the next passes run without them.
    struct Reprice {
        Engine& e;
        ~Reprice() { e.reprice_if_given_back(); }
    } reprice{*this};
    const BatchStart start = cpu_ ? BatchStart{} : batch_start(batch);
    try {
        pool_->run([&] { backend_->eval_batch(batch, *kv_, logits_, hidden_); });
    } catch (const DeviceOutOfMemory& e) {
        if (cpu_) throw;
        leave_device(e.what(), start);
        // A batch of more than one pass may have committed some before the failure (their KV
        // now in the host's cache): they are forgotten and the whole batch runs again on the
        // CPU, so that its logits and hidden states come from one run.
        for (size_t i = 0; i < batch.size(); ++i)
            if (kv_->truncate_seq(batch[i].seq, start.lengths[i]) != start.lengths[i]) throw;
        return eval_batch(batch);
    }
    return logits_;
}

Engine::BatchStart Engine::batch_start(std::span<const SeqTokens> batch) const {
    BatchStart start;
    for (const SeqTokens& e : batch) start.lengths.push_back(kv_->seq_len(e.seq));
    if (const RoutingStats* routed = backend_->routing_stats()) start.routing = routed->snapshot();
    const Backend::DeviceMemory device = backend_->device_memory();
    start.device_expert_choices = device.expert_choices;
    start.device_offloaded_choices = device.offloaded_expert_choices;
    return start;
}

std::shared_ptr<const Placement> Engine::running_placement() const {
    std::lock_guard lock(running_mu_);
    if (running_) return running_;
    return {std::shared_ptr<const Placement>{}, placement_.get()};  // as placed, owned by the engine
}

planner::Prediction Engine::predict(int n_prompt, int n_generated, int batch, int decode_rows) const {
    return running_placement()->predict(n_prompt, n_generated, batch, decode_rows);
}

}  // namespace strata::runtime
