#pragma once
// The CUDA backend's state, shared by the files that implement it: cuda_backend.cpp (the
// pass loop and the head), cuda_memory.cpp (device buffers), cuda_weights.cpp (weights on the
// device), cuda_layer.cpp (one layer's compute) and cuda_attention.cpp (attention on the
// device or the host, KV rebuilt on the device).
#include <cstdint>
#include <memory>
#include <vector>

#include "gpu/cuda_kernels.h"
#include "gpu/cuda_stream.h"
#include "gpu/device_pool.h"
#include "runtime/exec/cuda_backend.h"
#include "runtime/exec/cuda_staging.h"
#include "runtime/exec/kv_rebuild.h"
#include "runtime/exec/layer_pipeline.h"
#include "runtime/weights/weight_store.h"

namespace strata::runtime {

// A tensor on the device.
struct DevWeight {
    DType type = DType::F32;
    const void* data = nullptr;
    int64_t n_rows = 0, n_cols = 0;
    explicit operator bool() const { return data != nullptr; }
    const float* f32() const { return static_cast<const float*>(data); }
};
struct DevLayer {
    DevWeight attn_norm, wq, wk, wv, wo, bq, bk, bv, ffn_norm, gate, up, down;
};

// The layer's tensors at their offsets inside its range, which starts at `base` on the device.
DevLayer rebase(const WeightStore& store, int il, const LayerWeights& l, const std::byte* base);

struct CudaBackend::Impl {
    // Rows of one pass up to which a matmul runs as one GEMV per row: each row then gets the
    // same bits whatever else the pass holds (decode steps of a batch match a sequence alone).
    // Longer prompt segments go through dequantize + cuBLAS.
    static constexpr int64_t kGemvRows = 8;
    // Rows of logits computed per round trip in head().
    static constexpr int64_t kHeadRows = 16;

    const models::Hparams& hp;
    WeightStore& store;
    CudaBackendOptions opts;
    gpu::DevicePool pool;
    gpu::Streams streams;
    gpu::Cublas cublas;
    int32_t max_blocks;  // block table length of a sequence of n_ctx positions
    int64_t kv_elem;     // bytes of one KV element
    int64_t kv_block_elems;  // device KV: elements from one block to the next
    DType kv_type;

    // Weights.
    gpu::DeviceBuffer head_buf;  // output norm, output matrix, rope frequency factors
    DevWeight output_norm, output, rope_freqs;
    std::vector<gpu::DeviceBuffer> layer_bufs;  // layers kept on the device
    std::vector<DevLayer> layers;          // their tensors (the streamed ones' are rebased per pass)
    std::vector<gpu::DeviceBuffer> slots;
    std::vector<std::unique_ptr<gpu::Event>> copied, computed;  // per slot
    std::vector<PipelineStep> schedule;

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
    gpu::DeviceBuffer x, xn, q, k, v, attn, gate, up, out, x16, w16, logits, ints, tables, scratch;
    std::unique_ptr<HostStaging> host;
    gpu::Event ev_inputs, ev_qkv, ev_down[2], ev_up[2], ev_logits;

    Impl(const models::Hparams& h, WeightStore& s, const KvCache& kv, storage::MemoryBudget& dram, const CudaBackendOptions& o);
    void load_weights(storage::MemoryBudget& dram);
    void allocate(const KvCache& kv);
    float* dev_f(const gpu::DeviceBuffer& b, int64_t row, int64_t width) const { return b.as<float>() + row * width; }

    // y rows [r0, r1) = x rows W^T (GEMV per row up to kGemvRows rows, else cuBLAS).
    void matmul(const DevWeight& w, const float* x_rows, float* y_rows, int64_t n);
    // Rows [0, n_long) as one product, the rest a row at a time (see kGemvRows).
    void project(const DevWeight& w, const float* x_all, float* y_all, int64_t n, int64_t n_long);
    void upload_pass(const PassLayout& p, const KvCache& kv);
    void layer(int il, const DevLayer& l, const PassLayout& p, KvCache& kv);
    gpu::RopeArgs rope_args(int32_t n_heads) const;
    void rebuild_kv(int il, const DevLayer& l);
    void attention_on_device(int il, const DevLayer& l, const PassLayout& p, KvCache& kv);
    void attention_on_host(int il, const DevLayer& l, const PassLayout& p, KvCache& kv);
};

}  // namespace strata::runtime
