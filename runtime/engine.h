#pragma once
// One loaded model ready to run: the GGUF file, its tokenizer, the KV cache, the weights and the
// backend that computes, as the run's layout placed them (runtime/place/run_layout.h), and the
// CPU threads. A facade: the scheduler (runtime/scheduler.h), the one generation loop of every
// command, runs its sequences through create_seq, attach_prefix and eval_batch.
#include <chrono>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "models/gguf_file.h"
#include "models/hparams.h"
#include "models/tokenizer.h"
#include "planner/plan.h"
#include "runtime/exec/cpu/cpu_backend.h"
#include "runtime/place/gpu_placement.h"
#include "runtime/place/tensor_overrides.h"
#include "runtime/weights/expert_slots.h"
#include "runtime/generation.h"
#include "runtime/sampler.h"
#include "runtime/spec/draft_source.h"
#include "storage/budget.h"

namespace strata::cpu { class ThreadPool; }
namespace strata::gpu { class Device; }

namespace strata { class Trace; }

namespace strata::runtime {

class KvCache;
class TokenTrie;
class WeightStore;
struct Placement;

// The context an engine runs: `requested` when above 0, else the model's training context, at
// most this many positions (a long-context model's full window would take its KV cache's memory).
inline constexpr int kMaxDefaultContext = 4096;
inline int context_size(int requested, int n_ctx_train) {
    return requested > 0 ? requested : std::min(n_ctx_train, kMaxDefaultContext);
}

// How the hidden states of a text's tokens become one embedding (GGUF `<arch>.pooling_type`).
enum class Pooling { Last, Mean, First };

struct EngineOptions {
    std::filesystem::path model;  // empty: the default model
    int n_threads = 0;            // 0: every core
    int n_ctx = 0;                // 0: the model's training context, at most kMaxDefaultContext
    uint64_t dram_budget = 0;     // bytes of DRAM for weights, KV cache and buffers; 0: no limit
    int prefetch_depth = 2;       // streamed layers read ahead of compute
    int n_predict = 0;            // tokens generated per request, when known: the plan's workload
    std::string prompt;           // the prompt the run is for, when known: the plan is made for its tokens
    int n_prompt = 0;             // tokens after `prompt`'s, or without it the whole (bench's -d + -p; a turn's for chat and serve)
    int n_batch = 1;              // sequences decoded together, when known: the plan is made for them
    // Rows a sequence's decode pass computes at most: 1, or 1 + the drafts a speculative pass
    // verifies; the logits of the batch's sequences and one sequence's drafts are held in the
    // budget from the start.
    int decode_rows = 1;
    std::optional<planner::Plan> plan;  // --plan FILE: run by this plan instead of making one
    std::function<void(const Placement&)> on_plan;  // sees the plan before weights load (--show-plan)
    std::filesystem::path kv_spill_dir;  // where KV layers that do not fit go; empty: the cache folder
    // Disk there for prefix-cache blocks evicted from DRAM (runtime/kv/prefix_spill.h); nullopt:
    // four times the KV cache; 0: none (evicted prefixes are recomputed).
    std::optional<uint64_t> prefix_spill_bytes;
    std::filesystem::path trace_path;    // write a Chrome/Perfetto trace here; empty: none
    // Single-level int8 activations for block-quantized weights (llama.cpp's precision): faster
    // prefill; off by default because the float reference's tokens are then not always kept.
    bool int8_activations = false;
    // Prompt matmuls of 128+ tokens through oneDNN's bf16 matmul on AMX (cpu/onednn_matmul.h):
    // much faster prefill, bf16 rounding of weights and activations. Process-wide once set.
    bool bf16_prefill = false;
    // Resident block-quantized matrices rewritten at load into the order the AVX-512 kernels
    // read them (cpu::tile_weights): decode streams them linearly. Same results either way (the
    // bf16 prefill dequantizes its rows from the tiles).
    bool tile_weights = true;
    // A device's decode steps recorded once as CUDA graphs and launched whole (DeviceBackendOptions::
    // graphs); off, each op is launched, and a --trace times each where a graph is one span.
    bool graphs = true;
    // Positions of paged KV cache shared by all sequences (runtime/kv/kv_cache.h); 0: n_ctx.
    int kv_positions = 0;
    // What sizes the context and the KV cache on the command line, for hints when they cannot
    // be held (perplexity's is --chunk; bench's -b, -d, -p and -n).
    std::string sized_by = "a smaller context (--ctx)";
    // The KV cache's element type: F16 (llama.cpp's default) halves F32's memory and attention
    // reads; BF16 likewise with less precision; Q8_0 takes 8.5 bits a value (lossy).
    DType kv_type = DType::F16;
    // The CUDA backend: --gpu-mem (unset: the device's default budget when there is one; 0: the
    // CPU only) and where attention runs (--attention). Without a device the CPU runs, with one line saying why.
    GpuRequest gpu;
    // --override-tensor REGEX=TIER, in order (runtime/place/tensor_overrides.h).
    std::vector<TensorOverride> overrides;
    // How the expert cache of offloaded experts chooses what leaves (--expert-policy).
    ExpertPolicy expert_policy = ExpertPolicy::Adaptive;
    // Above 0: only the model's first n layers are loaded and run, then its output norm and
    // head (a self-speculative drafter: runtime/spec/self_drafter.h).
    int n_layers = 0;
    // An engine that drafts beside this one (runtime/spec/draft_engine.h): under a DRAM budget its
    // share (every layer in memory, its KV cache for this engine's context) is planned around as
    // the KV cache is, and reserved for it (dram_beside()).
    std::optional<DraftSource> draft;
};

// What each memory tier holds now and what the disk has served: the live view of `strata
// serve`'s page. The budgets are 0 where there is no limit (DRAM) or no tier (GPU).
struct TierGauges {
    uint64_t gpu_used = 0, gpu_budget = 0;  // the budget less what was taken away mid-run
    uint64_t gpu_memory_losses = 0;  // times device memory was taken away (or a pass found it full)
    int32_t gpu_layers_moved = 0;    // layers moved from the device to the CPU because of it
    int32_t gpu_experts_given_back = 0;  // held routed experts given back to the host because of it
    uint64_t gpu_expert_choices = 0;  // routed choices (a token's, to one expert) its held experts computed so far
    uint64_t gpu_offloaded_expert_choices = 0;  // and those op offload computed there in prompts' passes
    bool gpu_left = false;  // the device could not hold its own buffers: the run went on on the CPU alone
    uint64_t dram_used = 0, dram_budget = 0;
    uint64_t nvme_used = 0;  // weights and KV the plan reads from disk instead of holding
    uint64_t nvme_read = 0;  // bytes read from disk since the start (streamed layers, experts missed)
    int32_t kv_blocks_used = 0, kv_blocks = 0;  // the paged KV cache's blocks held by sequences
    bool has_expert_cache = false;
    uint64_t expert_hits = 0, expert_misses = 0;  // offloaded experts chosen and found in DRAM, or read
    // The counters alone (losses, experts given back and their choices, bytes read, expert hits
    // and misses; the gauges zero): what an unloaded engine leaves to a server's totals.
    TierGauges counters() const {
        TierGauges c;
        c.gpu_memory_losses = gpu_memory_losses, c.nvme_read = nvme_read;
        c.gpu_experts_given_back = gpu_experts_given_back, c.gpu_expert_choices = gpu_expert_choices;
        c.gpu_offloaded_expert_choices = gpu_offloaded_expert_choices;
        c.has_expert_cache = has_expert_cache, c.expert_hits = expert_hits, c.expert_misses = expert_misses;
        return c;
    }
    // Another engine's, added (a server's models together).
    TierGauges& operator+=(const TierGauges& o) {
        gpu_used += o.gpu_used, gpu_budget += o.gpu_budget, dram_used += o.dram_used, dram_budget += o.dram_budget;
        gpu_memory_losses += o.gpu_memory_losses, gpu_layers_moved += o.gpu_layers_moved;
        gpu_experts_given_back += o.gpu_experts_given_back, gpu_expert_choices += o.gpu_expert_choices;
        gpu_offloaded_expert_choices += o.gpu_offloaded_expert_choices;
        gpu_left = gpu_left || o.gpu_left;
        nvme_used += o.nvme_used, nvme_read += o.nvme_read;
        kv_blocks_used += o.kv_blocks_used, kv_blocks += o.kv_blocks;
        has_expert_cache = has_expert_cache || o.has_expert_cache;
        expert_hits += o.expert_hits, expert_misses += o.expert_misses;
        return *this;
    }
};

class Engine {
public:
    explicit Engine(const EngineOptions& opts);
    ~Engine();

    // What an engine of `opts` would hold, without loading it: its context and the positions its
    // KV cache's blocks take, and the DRAM it takes with every layer in memory on the CPU (its
    // weights, KV cache and activations as the engine counts them; a drafting engine's aside).
    struct Extent {
        int n_ctx = 0;
        int kv_positions = 0;
        uint64_t resident_dram = 0;
    };
    static Extent extent(const EngineOptions& opts);

    const models::Hparams& hparams() const { return hp_; }
    const models::Tokenizer& tokenizer() const { return *tok_; }
    const models::GgufFile& file() const { return file_; }
    const WeightStore& weights() const { return *weights_; }
    const KvCache& kv_cache() const { return *kv_; }
    const storage::MemoryBudget& dram() const { return *dram_; }
    // The DRAM of the budget held for the drafting engine beside this one (EngineOptions::draft).
    uint64_t dram_beside() const { return beside_.bytes(); }
    // Gives that share back to the budget where no drafting engine comes after all.
    void release_draft_share() { beside_.reset(); }
    // The plan the weights are placed by, with what it predicts (runtime/place/placement.h).
    const Placement& placement() const { return *placement_; }
    // The run priced as it runs now (Placement::predict): the placement, or after device memory
    // was taken away, the layers moved to the CPU priced there. Safe from any thread.
    planner::Prediction predict(int n_prompt, int n_generated, int batch = 1, int decode_rows = 1) const;
    // The placement as it runs now: placement(), or after a loss of device memory a copy with the
    // moved layers on the CPU (its summary says so). Safe from any thread.
    std::shared_ptr<const Placement> running_placement() const;
    // Rows of logits a pass computes within the DRAM budget: those it holds from the start
    // (EngineOptions::n_batch and decode_rows); any number without a budget.
    int64_t max_logit_rows() const {
        return dram_->limit() == UINT64_MAX ? std::numeric_limits<int64_t>::max() : planned_logit_rows_;
    }
    std::string_view backend_name() const { return backend_->name(); }
    // Where the device backend keeps the KV cache of the layers it computes; none on the CPU.
    std::optional<KvPlacement> kv_placement() const { return kv_on_; }
    // Whether a pass verifies draft trees, else chains only (Backend::verifies_trees).
    bool verifies_trees() const { return Backend::verifies_trees(*kv_); }
    // After a pass that verified `seq`'s draft tree: the kept path (nodes at slots seq_len +
    // slots[i]) becomes its next positions, wherever the backend holds their keys and values
    // (KvCache::keep_path, Backend::keep_path).
    void keep_path(SeqId seq, std::span<const int64_t> slots, std::span<const int32_t> tokens) {
        backend_->keep_path(*kv_, seq, slots);
        kv_->keep_path(seq, slots, tokens);
    }
    // The pooling the model's metadata names (`<arch>.pooling_type`); Last when it names none.
    Pooling pooling() const { return pooling_; }
    // The vocabulary as a trie for grammars, built on first use. Thread-safe.
    const TokenTrie& token_trie() const;
    // A sampler for `params`, held to its grammar when it has one.
    std::unique_ptr<Sampler> make_sampler(const GenerateParams& params) const;
    // How often each expert of each layer was chosen (mixture-of-experts models on the CPU), or null.
    const RoutingStats* routing_stats() const { return backend_->routing_stats(); }
    // Adds the routing counts so far to the statistics saved for this model
    // (planner/routing_profile.h), for the next plan; returns where, or empty when there was
    // nothing to save (a dense model, no token run) or it could not be written (logged).
    std::filesystem::path save_routing_stats() const;
    int n_ctx() const;
    int n_threads() const;
    // The tiers now (runtime/engine_gauges.cpp). On the thread that runs passes: the weight
    // store's and expert cache's counters are that thread's.
    TierGauges gauges() const;

    // Sequences of the paged KV cache, for the scheduler. A new sequence is empty;
    // attach_prefix gives it the cached KV of the longest prefix of `tokens` it can (whole
    // blocks, never all of `tokens`) and returns the positions attached.
    SeqId create_seq();
    void free_seq(SeqId seq);
    int attach_prefix(SeqId seq, std::span<const int32_t> tokens);
    // Whether unshare can copy blocks here: every KV layer in DRAM (none spilled to disk).
    bool copies_blocks() const { return kv_->n_spilled() == 0; }
    // After attach_prefix, where copies_blocks: the sequence's copies of the blocks it shares,
    // wherever the backend keeps their keys and values (KvCache::unshare, Backend::copy_blocks).
    // Returns the positions it keeps.
    int unshare(SeqId seq);
    // Runs every entry's tokens (distinct sequences) after their sequences' last positions, in
    // passes of up to Backend::kMaxUbatch tokens, and returns the logits Backend::eval_batch
    // writes (a Logits entry's last token, every token of an AllLogits entry, in entry order).
    // Throws OutOfBudget when the KV pool cannot hold the new positions.
    std::span<const float> eval_batch(std::span<const SeqTokens> batch);
    // Rows of the last eval_batch's logits a Verify entry's pass left out (Backend::head_deferred),
    // computed now into the span it returned; rows already there are left as they are.
    void head_deferred(std::span<const int64_t> logit_rows);
    bool deferred(int64_t logit_row) const { return backend_->deferred(logit_row); }
    // The last eval_batch's hidden-state outputs: n_embd floats per entry (PassOutput).
    std::span<const float> batch_hidden() const { return hidden_; }
    KvCache& kv() { return *kv_; }
    // Passes run the first n of the loaded layers, then the output norm and head (an early exit:
    // runtime/spec/self_drafter.h); 0 or n_layer: all of them. The CPU backend only: throws
    // UsageError on a device.
    void exit_after(int n_layers);

private:
    // The CPU backend, or the device backend on `device` with its KV cache where `kv_on` says.
    void make_backend(const EngineOptions& opts, KvPlacement kv_on, std::unique_ptr<gpu::Device> device);
    // The CPU backend in place of any other, its resident weights in the CPU kernels' tiles.
    void use_cpu_backend();
    // Resident block-quantized weights (of `only_layers`; null: all) rewritten in the CPU kernels'
    // tile order (EngineOptions::tile_weights).
    void tile_for_cpu(const std::vector<bool>* only_layers);
    bool tile_weights_ = true, int8_activations_ = false;  // EngineOptions', for a backend made later

    std::unique_ptr<Trace> trace_;  // first in, last out: everything below may record into it
    models::GgufFile file_;
    models::Hparams hp_;
    std::unique_ptr<models::Tokenizer> tok_;
    std::unique_ptr<cpu::ThreadPool> pool_;
    std::unique_ptr<storage::MemoryBudget> dram_;
    std::unique_ptr<KvCache> kv_;
    std::unique_ptr<Placement> placement_;
    // The placement as it runs after the device gave layers or held experts back for lack of
    // memory (null: as placed); written after a pass, read by predict() from other threads.
    mutable std::mutex running_mu_;
    std::shared_ptr<const Placement> running_;
    // What the device had given back when running_ was priced: layers moved, experts returned.
    uint64_t running_losses_ = 0;  // device memory losses the running placement is priced after
    // engine_device_loss.cpp: device memory taken away mid-run. After a pass that made the device
    // give layers or held experts back (or that failed after it), running_ priced as the run now
    // runs.
    void reprice_if_given_back();
    // A batch's starting point on a device backend: each entry's sequence length, the routers'
    // choices (RoutingStats) and those the device's held experts computed. A run that leaves the
    // device mid-batch forgets the passes the batch committed and runs it again from there.
    struct BatchStart {
        std::vector<int32_t> lengths;
        std::vector<std::vector<uint64_t>> routing;
        uint64_t device_expert_choices = 0, device_offloaded_choices = 0;
    };
    BatchStart batch_start(std::span<const SeqTokens> batch) const;
    // When the device cannot hold even its own buffers: its KV cache copied into the host's, the
    // device let go, and every layer on the CPU from then on, priced so, its counts of expert
    // choices as they were at `start`; `why` goes into the log.
    void leave_device(const std::string& why, const BatchStart& start);
    // What the device had given back when it was let go (its memory in use and budget zero),
    // and the DRAM its KV cache took then.
    std::optional<Backend::DeviceMemory> left_device_;
    storage::Reservation kv_from_device_;
    // The CPU runs the layers whose KV cache the plan kept on the device: the host's cache of
    // them charged to --dram (the run's layout charged only the plan's CPU layers').
    void charge_kv_the_device_held();
    std::unique_ptr<WeightStore> weights_;
    std::unique_ptr<Backend> backend_;
    CpuBackend* cpu_ = nullptr;  // backend_, when it is the CPU's
    std::optional<KvPlacement> kv_on_;  // with a device backend
    storage::Reservation working_;
    storage::Reservation beside_;  // EngineOptions::draft's share
    int planned_logit_rows_ = 1;  // rows of logits the working memory holds from the start
    uint64_t planned_batch_logits_ = 0;  // the batch's logits the working memory holds from the start
    storage::Reservation batch_logits_;  // beyond those: grows with the largest batch eval_batch has run
    bool warned_logits_ = false;
    std::vector<float> logits_, hidden_;
    Pooling pooling_ = Pooling::Last;
    mutable std::once_flag trie_once_;
    mutable std::unique_ptr<TokenTrie> trie_;
};

}  // namespace strata::runtime
