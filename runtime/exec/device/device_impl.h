#pragma once
// The device backend's state, shared by the files that implement it: device_backend.cpp (the
// pass loop and the head), device_memory.cpp (device buffers), device_weights.cpp (weights on
// the device), device_layer.cpp (a pass's upload, a layer on the device or the host),
// device_steps.cpp (a layer program's steps as device ops), device_attention.cpp (attention on
// the device, KV rebuilt there), cpu_attention_pipeline.cpp (the host CPU attending beside the
// device) and device_moe.cpp (a mixture of experts: the experts on the host). Every device op goes through gpu::Device, so the same code drives
// the CUDA device and the simulated one.
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "gpu/device.h"
#include "runtime/exec/device/device_backend.h"
#include "runtime/exec/device/device_experts.h"
#include "runtime/exec/device/device_weight.h"
#include "runtime/exec/cpu/cpu_backend.h"
#include "runtime/exec/device/host_staging.h"
#include "runtime/exec/cpu/kv_rebuild.h"
#include "runtime/exec/layer_program.h"
#include "runtime/exec/device/layer_pipeline.h"
#include "runtime/weights/weight_store.h"
#include "storage/budget.h"

namespace strata::runtime {

// Rows [r0, r1) of a pass and its segments there: a sub-batch the host CPU attends for while
// the device computes the other (cpu_attention_pipeline.cpp).
struct SubBatch {
    std::span<const PassLayout::Segment> segs;
    int64_t r0 = 0, r1 = 0;
    int64_t rows() const { return r1 - r0; }
    bool empty() const { return r1 == r0; }
};
// The pass cut in two at the sequence boundary that best halves the keys attention reads, the
// long segments (a prompt's rows) in the first; the second is empty for one sequence, or
// where !split.
std::array<SubBatch, 2> split_for_cpu_attention(const PassLayout& p, bool split);

// A layer's tensors on the device, by their LayerWeights member.
struct DevLayer {
    std::array<DevWeight, LayerWeights::kCount> w;
    const DevWeight& operator[](LayerWeights::Member m) const { return w[LayerWeights::index_of(m)]; }
    DevWeight& operator[](LayerWeights::Member m) { return w[LayerWeights::index_of(m)]; }
};

// A mixture of experts' tensors that its host computes with: the router, the routed and the
// shared experts (device_moe.cpp).
bool expert_tensor(LayerWeights::Member m);

// The layer's tensors at their offsets inside its range, which starts at `base` on the device.
DevLayer rebase(const WeightStore& store, int il, const LayerWeights& l, const std::byte* base);

struct DeviceBackend::Impl {
    // Rows of logits computed per round trip in head().
    static constexpr int64_t kHeadRows = 16;
    // Per token of a pass: position, KV block, KV row, key count, first slot of its draft tree.
    static constexpr int64_t kPassInts = 5;
    // Mask words per row of a draft tree of up to kMaxUbatch nodes, one slot a node
    // (runtime/exec/draft_rows.h).
    static constexpr int64_t kMaskWords = (kMaxUbatch + 63) / 64;

    const models::Hparams& hp;
    WeightStore& store;
    DeviceBackendOptions opts;
    std::unique_ptr<gpu::Device> dev;  // first in, last out: the buffers and streams below are its
    std::unique_ptr<gpu::Stream> compute, h2d, d2h;
    int32_t max_blocks;       // block table length of a sequence of n_ctx positions
    DType kv_type;
    int64_t kv_row_bytes;     // one position's keys (or values) in the cache's type
    int64_t kv_block_bytes;   // device KV: bytes from one block to the next
    int64_t hidden_row_bytes; // one position's saved hidden state (KV recomputed)

    // Weights.
    gpu::DeviceBuffer head_buf;  // output norm, output matrix, RoPE's frequency factors
    DevWeight output_norm, output;
    std::array<DevWeight, 4> rope_factors;  // by RopeFactors: none, llama3's, phi3's long and short
    std::vector<LayerProgram> programs;  // every layer's, for the KV cache's context
    std::vector<gpu::DeviceBuffer> layer_bufs;  // layers kept on the device
    std::vector<DevLayer> layers;          // their tensors (the streamed ones' are rebased per pass)
    std::vector<gpu::DeviceBuffer> slots;
    std::vector<std::unique_ptr<gpu::Event>> copied, computed;  // per slot
    // Per buffer of the store's op offload rebuilds (WeightStore::next_rebuild_buffer): the slot
    // whose `copied` event follows its last copy, or -1.
    std::vector<int> rebuild_copies;
    std::vector<PipelineStep> schedule;
    // The CPU layers copied in too (op offload; a mixture of experts': its layers whose experts
    // are the host's); empty: none.
    std::vector<PipelineStep> offload_schedule;
    std::unique_ptr<CpuBackend> host_layers;  // the plan's CPU layers, when it has some
    std::vector<uint64_t> routed_before_pass;  // their routing counts before a pass (DeviceBackend::compute)
    // Rows that go up mid-pass (DeviceExperts' inputs, a staged layer's KV blocks), on a stream
    // of their own, not behind op offload's weights on h2d; made at its first use (rows_stream).
    std::unique_ptr<gpu::Stream> rows_up;
    std::unique_ptr<DeviceExperts> experts;  // a mixture of experts' routed experts held here
    Trace* trace = nullptr;                 // the CPU's work beside the device's layers
    int attention_track = 0;
    int cpu_layer_track = 0;  // the CPU's layers beside the device, and a mixture's experts on the host

    // KV cache on the device: per layer (Device), or one layer's staging (HostGpuAttention, and
    // HostCpuAttention's prompt passes, kv_k[0]; with Device, op offload's CPU layers stage in
    // kv_k[offload_kv]); kv_slot[il] indexes kv_k and kv_v. Layers the plan recomputes (Device only) keep their
    // saved hidden states in hidden[hidden_slot[il]] and share one more K/V pair, rebuilt
    // before each use from rebuild_list (blocks, rows, positions: n_rebuild each).
    std::vector<gpu::DeviceBuffer> kv_k, kv_v, hidden;
    std::vector<int32_t> kv_slot, hidden_slot;
    int32_t offload_kv = -1;  // -1: none of op offload's own
    gpu::DeviceBuffer rebuild_list;
    std::vector<RebuildRow> rebuild_rows;
    int64_t n_rebuild = 0;

    // Activations for passes of kMaxUbatch tokens, token-major, and scratch.
    gpu::DeviceBuffer x, xn, q, k, v, attn, gate, up, out, logits, ints, tables, masks, scratch;
    int32_t mask_words = 0;  // the pass's draft trees' mask words per row (0: none)
    gpu::DeviceBuffer q_low_rank, q_latent, attn_latent;  // MLA's (layer_program.h's Act)
    std::unique_ptr<HostStaging> host;
    std::unique_ptr<gpu::Event> ev_computed, ev_inputs, ev_qkv, ev_down[2], ev_up[2], ev_logits;
    std::unique_ptr<gpu::Event> ev_ready[2];  // a sub-batch's q, k, v computed (CPU attention)
    // This pass's attention is the host CPU's: HostCpuAttention, but for a prompt's pass where
    // the device reads the cache's type (it attends then, over the blocks copied in).
    bool host_attends = false;

    Impl(std::unique_ptr<gpu::Device> device, const models::Hparams& h, WeightStore& s, const KvCache& kv,
         storage::MemoryBudget& dram, const DeviceBackendOptions& o);
    ~Impl();  // waits for the device's queued work before its buffers go
    // Device bytes besides the layers kept there and the KV cache: activations and scratch for
    // passes of kMaxUbatch tokens, the output head and norms, `n_slots` buffers of `slot_bytes`.
    static uint64_t working_bytes(const gpu::Device& device, const models::Hparams& hp, uint64_t head_bytes,
                                  uint64_t slot_bytes, int n_slots, int n_ctx);
    // The host staging for passes of kMaxUbatch tokens, and a list of `rebuild_rows` positions to recompute.
    static HostStaging::Sizes staging_sizes(const models::Hparams& h, int32_t max_blocks, uint64_t rebuild_rows);
    // A mixture of experts: the device bytes of every layer's tensors but its router and
    // experts (which stay on the host, whose CPU runs them: device_moe.cpp).
    static uint64_t non_expert_bytes(const ModelWeights& w);
    void load_weights(storage::MemoryBudget& dram);
    // A mixture of experts: each layer's tensors but its router and experts copied from the
    // host's resident weights into a buffer of its own.
    void load_non_expert_weights();
    // Device buffers for the KV cache and activations; the routed experts opts.experts names.
    void allocate(const KvCache& kv, storage::MemoryBudget& dram);
    // Where each layer runs, by the weight store's residency.
    std::vector<LayerWork> layer_work() const;
    // The CPU backend for the layers the host computes, made on first need.
    void host_layers_needed();
    // Op offload's schedule (the CPU layers but those whose KV `kv` rebuilds), its pinned buffers
    // for the CPU layers read as in the file and (KV on the device) its staging pair from
    // `add_kv_pair`; returns the pinned bytes. Where DRAM or the device cannot hold them, a
    // warning and none. A mixture of experts' is prepare_expert_op_offload's.
    uint64_t prepare_op_offload(std::span<const LayerWork> work, const KvCache& kv, const std::function<int32_t()>& add_kv_pair,
                                storage::MemoryBudget& dram);
    // Prompts' passes run the CPU layers (a mixture of experts' experts) on the CPU from now on;
    // op offload's staging pair goes (a mixture of experts': its slots, and DeviceExperts made for it alone).
    void drop_op_offload();
    // device_moe.cpp: op offload of a mixture of experts: the layers whose routed experts a long
    // pass copies in (held in DRAM, in types the device reads), their slots, pinned buffers and
    // (where the device holds none) DeviceExperts; and their release.
    std::vector<int> expert_offload_layers() const;
    // DeviceExperts holding `held`, the host's feed-forward handing them their rows.
    void make_device_experts(const std::vector<std::vector<int32_t>>& held);
    uint64_t prepare_expert_op_offload(storage::MemoryBudget& dram);
    void drop_expert_op_offload();
    // Op offload that DRAM or the device cannot hold: a warning saying what runs `instead`, and none.
    uint64_t op_offload_failed(const OutOfBudget& e, std::string_view instead);

    // device_memory_loss.cpp: memory taken away mid-run. Before a pass, what the device may
    // still hold (Device::poll_memory); over it, held experts and layers go to the CPU until the
    // rest fits.
    void fit_memory(KvCache& kv);
    // Gives the held routed experts back to the host, the last layer's first, then moves layers
    // to the CPU, the last device-resident first, then the copied-in ones, until the device
    // holds at most `target` bytes; `why` goes into the log line. Throws DeviceOutOfMemory when
    // nothing is left to give back and the rest still does not fit.
    void give_back(uint64_t target, KvCache& kv, const std::string& why);
    int layer_to_move() const;  // -1: none left
    void move_to_cpu(int il, KvCache& kv);
    // Layer il's KV cache (or saved hidden states) from the device into the host's cache.
    void kv_down(int il, KvCache& kv);
    uint64_t memory_losses = 0;  // times memory was given back
    // The host's KV cache (or saved hidden states) of each layer moved to the CPU, and the K/V
    // pair rebuilt layers share once the first runs there (KvCache::layers_bytes), charged to
    // DRAM then: the run's layout charged only the plan's CPU layers' (host_working_bytes).
    storage::MemoryBudget& dram;
    std::vector<storage::Reservation> moved_kv;
    int layers_moved = 0;        // layers moved to the CPU so far
    int experts_given_back = 0;  // held routed experts given back to the host so far
    uint64_t expert_choices_before = 0;  // routed choices computed by held experts, all given back since
    uint64_t offloaded_choices_before = 0;  // and by op offload, through DeviceExperts gone since
    float* dev_f(const gpu::DeviceBuffer& b, int64_t row, int64_t width) const { return b.as<float>() + row * width; }

    // runtime::project on the compute stream.
    void project(const DevWeight& w, const float* x_all, float* y_all, int64_t n, int64_t n_long) {
        runtime::project(*dev, *compute, w, x_all, y_all, n, n_long);
    }
    float* act(Act a) const;
    void upload_pass(const PassLayout& p, const KvCache& kv);
    // device_backend.cpp: one pass (its inputs, the graph or the schedule);
    void run_pass(const PassLayout& p, KvCache& kv);
    // the pass's layers as its schedule says (copies, device and CPU layers),
    // or the graph of a decode step that has one (null where the pass cannot be one).
    void run_schedule(const PassLayout& p, KvCache& kv);
    // The schedule of pass `p`: offload_schedule for a pass long enough for op offload.
    const std::vector<PipelineStep>& schedule_for(const PassLayout& p) const;
    // Where layer il's K/V live: a layer the plan runs on the CPU keeps them in DRAM, and when
    // op offload computes it on the device in a prompt's pass, the device attends over its
    // blocks copied in (attention_on_device), as with HostGpuAttention.
    KvPlacement kv_of(int il) const {
        return store.residency().cpu(il) && opts.kv == KvPlacement::Device ? KvPlacement::HostGpuAttention : opts.kv;
    }
    // cpu_attention_pipeline.cpp: the schedule with the host CPU attending (HostCpuAttention),
    // a pass's two sub-batches interleaved so that attention overlaps the device's matmuls.
    struct CpuAttentionPass;
    void run_with_cpu_attention(const PassLayout& p, KvCache& kv);
    gpu::Graph* step_graph(const PassLayout& p, KvCache& kv);
    struct StepGraph {
        int seen = 0;
        std::unique_ptr<gpu::Graph> graph;
    };
    std::map<int64_t, StepGraph> graphs;  // by the step's row count
    uint64_t graph_launches = 0;
    std::vector<gpu::QueryRun> runs;      // the pass's prompt chunks, for the attention kernels
    void layer(int il, const DevLayer& l, const PassLayout& p, KvCache& kv);
    // The run of CPU layers (and copies between them) from steps[first]; returns the index past it.
    size_t layers_on_cpu(std::span<const PipelineStep> steps, size_t first, const PassLayout& p, KvCache& kv);
    // A Copy step: the layer's weights into its slot on the H2D stream.
    gpu::Stream& rows_stream();
    void copy_in(const PipelineStep& step);

    // device_steps.cpp: the steps of a program over device arrays.
    using Rows = StepRows<int32_t>;
    Rows pass_rows(const PassLayout& p) const;
    void run(std::span<const Step> steps, const LayerProgram& prog, const DevLayer& l, const Rows& r, const PassLayout* p,
             KvCache& kv);
    void step(const Step& s, const LayerProgram& prog, const DevLayer& l, const Rows& r, const PassLayout* p, KvCache& kv);
    size_t fused(std::span<const Step> steps, const LayerProgram& prog, const DevLayer& l, const Rows& r, const PassLayout* p,
                 KvCache& kv, bool saves_inputs);
    size_t rotated_with_store(std::span<const Step> steps, const LayerProgram& prog, const DevLayer& l, const Rows& r,
                              const PassLayout* p, KvCache& kv, bool saves_inputs);
    // A Rope step's arguments: its heads in rows of `width` values.
    gpu::RopeArgs rope_args(const RopeSpec& spec, int32_t n_heads, int64_t width) const;
    // A HeadMatmul step: every head's values through its own matrix in one op (Device::head_matmul).
    void head_matmul(const Step& st, const DevLayer& l, const Rows& r);
    // K and V rows into the layer's device cache (and the rows' inputs, where it rebuilds its KV),
    // the keys rotated on the way where `key_rope` is given, and then the queries too where
    // `query_rope` is (one op: Device::rope_qkv_store).
    void store_kv(int il, const Rows& r, const gpu::RopeArgs* key_rope = nullptr, const gpu::RopeArgs* query_rope = nullptr);

    // device_attention.cpp: layer il's attention of the queries in `queries` into `into` (its
    // output projection is the caller's).
    void rebuild_kv(const LayerProgram& prog, const DevLayer& l, KvCache& kv);
    void attention_on_device(const LayerProgram& prog, const DevLayer& l, const PassLayout& p, KvCache& kv,
                             const float* queries, float* into);
    // device_moe.cpp: a mixture of experts' experts on the host: `out` = the experts of `in`.
    void experts_on_host(int il, const PassLayout& p, const float* in, float* out);
    // `n_embd`-wide rows of the pass: `down` copied to the host's `host_down`, `run` there, the
    // host's `host_up` copied back up to `up`.
    void on_host(const PassLayout& p, const float* down, float* host_down, const std::function<void()>& run,
                 const float* host_up, float* up);
};

}  // namespace strata::runtime
