#pragma once
// The device backend's state, shared by the files that implement it: device_backend.cpp (the
// pass loop and the head), device_memory.cpp (device buffers), device_weights.cpp (weights on
// the device), device_layer.cpp (one layer's compute), device_attention.cpp (attention on the
// device or the host, KV rebuilt on the device) and device_moe.cpp (a mixture of experts: attention
// on the device, the feed-forward on the host). Every device op goes through gpu::Device, so
// the same code drives the CUDA device and the simulated one.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "gpu/device.h"
#include "runtime/exec/device_backend.h"
#include "runtime/exec/device_experts.h"
#include "runtime/exec/device_weight.h"
#include "runtime/exec/forward.h"
#include "runtime/exec/host_staging.h"
#include "runtime/exec/kv_rebuild.h"
#include "runtime/exec/layer_pipeline.h"
#include "runtime/weights/weight_store.h"

namespace strata::runtime {

struct DevLayer {
    DevWeight attn_norm, wq, wk, wv, wo, bq, bk, bv, ffn_norm, gate, up, down;
    DevWeight q_norm, k_norm;  // qwen3: RMSNorm weights of one head (QK-norm)
};

// The layer's tensors at their offsets inside its range, which starts at `base` on the device.
DevLayer rebase(const WeightStore& store, int il, const LayerWeights& l, const std::byte* base);

struct DeviceBackend::Impl {
    // Rows of logits computed per round trip in head().
    static constexpr int64_t kHeadRows = 16;

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
    gpu::DeviceBuffer head_buf;  // output norm, output matrix, rope frequency factors
    DevWeight output_norm, output, rope_freqs;
    std::vector<gpu::DeviceBuffer> layer_bufs;  // layers kept on the device
    std::vector<DevLayer> layers;          // their tensors (the streamed ones' are rebased per pass)
    std::vector<gpu::DeviceBuffer> slots;
    std::vector<std::unique_ptr<gpu::Event>> copied, computed;  // per slot
    std::vector<PipelineStep> schedule;
    std::unique_ptr<Forward> host_layers;  // the plan's CPU layers, when it has some
    std::unique_ptr<DeviceExperts> experts;  // a mixture of experts' routed experts held here
    Trace* trace = nullptr;                 // the CPU's attention for the device's layers
    int attention_track = 0;

    // KV cache on the device: per layer (Device), or one layer's staging (HostGpuAttention);
    // kv_slot[il] indexes kv_k and kv_v. Layers the plan recomputes (Device only) keep their
    // saved hidden states in hidden[hidden_slot[il]] and share one more K/V pair, rebuilt
    // before each use from rebuild_list (blocks, rows, positions: n_rebuild each).
    std::vector<gpu::DeviceBuffer> kv_k, kv_v, hidden;
    std::vector<int32_t> kv_slot, hidden_slot;
    gpu::DeviceBuffer rebuild_list;
    std::vector<RebuildRow> rebuild_rows;
    int64_t n_rebuild = 0;

    // Activations for passes of kMaxUbatch tokens, token-major, and scratch.
    gpu::DeviceBuffer x, xn, q, k, v, attn, gate, up, out, logits, ints, tables, scratch;
    std::unique_ptr<HostStaging> host;
    std::unique_ptr<gpu::Event> ev_computed, ev_inputs, ev_qkv, ev_down[2], ev_up[2], ev_logits;

    Impl(std::unique_ptr<gpu::Device> device, const models::Hparams& h, WeightStore& s, const KvCache& kv,
         storage::MemoryBudget& dram, const DeviceBackendOptions& o);
    ~Impl();  // waits for the device's queued work before its buffers go
    // The host staging for passes of kMaxUbatch tokens, and a list of `rebuild_rows` positions to recompute.
    static HostStaging::Sizes staging_sizes(const models::Hparams& h, int32_t max_blocks, uint64_t rebuild_rows);
    void load_weights(storage::MemoryBudget& dram);
    // A mixture of experts: each layer's attention tensors copied from the host's resident
    // weights into a buffer of its own (the experts and the router stay on the host).
    void load_attention_weights();
    // Device buffers for the KV cache and activations; the routed experts opts.experts names.
    void allocate(const KvCache& kv, storage::MemoryBudget& dram);
    float* dev_f(const gpu::DeviceBuffer& b, int64_t row, int64_t width) const { return b.as<float>() + row * width; }

    // runtime::project on the compute stream.
    void project(const DevWeight& w, const float* x_all, float* y_all, int64_t n, int64_t n_long) {
        runtime::project(*dev, *compute, w, x_all, y_all, n, n_long);
    }
    void upload_pass(const PassLayout& p, const KvCache& kv);
    void layer(int il, const DevLayer& l, const PassLayout& p, KvCache& kv);
    gpu::RopeArgs rope_args(int32_t n_heads) const;
    // RMSNorm of each of n tokens' n_heads heads of x, in place, when the layer has QK-norm (`w`).
    void norm_heads(float* x, const DevWeight& w, int64_t n, int32_t n_heads);
    void rebuild_kv(int il, const DevLayer& l);
    void attention_on_device(int il, const DevLayer& l, const PassLayout& p, KvCache& kv);
    void attention_on_host(int il, const DevLayer& l, const PassLayout& p, KvCache& kv);
    void layer_on_cpu(int il, const PassLayout& p, KvCache& kv);
    // A mixture of experts: layer il's feed-forward (norm, router, experts, residual) on the host.
    void ffn_on_host(int il, const PassLayout& p);
    // The pass's hidden states down to host_layers, `run` on them there, and back up.
    void on_host(const PassLayout& p, const std::function<void()>& run);
};

}  // namespace strata::runtime
