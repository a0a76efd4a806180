#include "runtime/exec/cuda_backend.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "cpu/quant.h"
#include "gpu/cuda_devices.h"
#include "gpu/cuda_kernels.h"
#include "gpu/cuda_stream.h"
#include "gpu/device_pool.h"
#include "models/gguf_file.h"
#include "runtime/exec/attention_pass.h"
#include "core/error.h"
#include "core/log.h"
#include "runtime/exec/kv_rebuild.h"
#include "runtime/exec/layer_pipeline.h"
#include "runtime/weights/weight_store.h"
#include "storage/budget.h"
#include "storage/file_io.h"
#include "storage/pinned_pool.h"

namespace strata::runtime {

std::string_view kv_placement_name(KvPlacement p) {
    switch (p) {
        case KvPlacement::Device: return "device (GPU attention)";
        case KvPlacement::HostCpuAttention: return "host (CPU attention)";
        case KvPlacement::HostGpuAttention: return "host, copied in per layer (GPU attention)";
    }
    return "?";
}

namespace {

using gpu::DeviceBuffer;
using gpu::Event;
using gpu::Stream;

// Rows of one pass up to which a matmul runs as one GEMV per row: each row then gets the same
// bits whatever else the pass holds (decode steps of a batch match a sequence alone). Longer
// prompt segments go through dequantize + cuBLAS.
constexpr int64_t kGemvRows = 8;
// Rows of logits computed per round trip in head().
constexpr int64_t kHeadRows = 16;

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
DevLayer rebase(const WeightStore& store, int il, const LayerWeights& l, const std::byte* base) {
    auto at = [&](const WeightRef& w) -> DevWeight {
        if (!w) return {};
        return {w.type, base + store.offset_in_layer(il, w), w.n_rows, w.n_cols};
    };
    return {at(l.attn_norm), at(l.wq), at(l.wk), at(l.wv), at(l.wo), at(l.bq), at(l.bk),
            at(l.bv), at(l.ffn_norm), at(l.ffn_gate), at(l.ffn_up), at(l.ffn_down)};
}

void check_types(const LayerWeights& l, int il) {
    for (const WeightRef* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_gate, &l.ffn_up, &l.ffn_down})
        if (!gpu::gpu_weight_type(w->type))
            throw BackendError(fmt::format("layer {} has {} weights, which the GPU kernels do not read", il, dtype_name(w->type)),
                               "GPU weight types: f16, q4_0, q4_1, q8_0, q4_k, q6_k; run this model with --gpu-mem 0");
    for (const WeightRef* w : {&l.attn_norm, &l.ffn_norm, &l.bq, &l.bk, &l.bv})
        if (*w && w->type != DType::F32)
            throw BackendError(fmt::format("layer {} has a {} norm or bias; the GPU path expects f32", il, dtype_name(w->type)),
                               "run this model with --gpu-mem 0");
}

// Page-locked host memory carved into named parts (cudaHostRegister'ed by the pool's pinner).
class HostStaging {
public:
    HostStaging(storage::MemoryBudget& dram, std::vector<uint64_t> sizes) {
        uint64_t total = 0;
        for (uint64_t& s : sizes) {
            offsets_.push_back(total);
            total += storage::align_up(std::max<uint64_t>(s, 1), 64);
        }
        storage::PinnedPoolOptions po;
        po.slot_bytes = total;
        po.n_slots = 1;
        po.what = "GPU staging buffers";
        pool_ = std::make_unique<storage::PinnedPool>(dram, po);
        slot_ = std::move(*pool_->try_acquire());
    }
    template <class T>
    T* part(size_t i) const { return reinterpret_cast<T*>(slot_.data() + offsets_[i]); }

private:
    std::unique_ptr<storage::PinnedPool> pool_;
    storage::PinnedSlot slot_;
    std::vector<uint64_t> offsets_;
};
enum StagingPart { kEmbd, kInts, kTables, kQ, kK, kV, kAttn, kLogits, kRebuild, kNumParts };

}  // namespace

struct CudaBackend::Impl {
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
    DeviceBuffer head_buf;  // output norm, output matrix, rope frequency factors
    DevWeight output_norm, output, rope_freqs;
    std::vector<DeviceBuffer> layer_bufs;  // layers kept on the device
    std::vector<DevLayer> layers;          // their tensors (the streamed ones' are rebased per pass)
    std::vector<DeviceBuffer> slots;
    std::vector<std::unique_ptr<Event>> copied, computed;  // per slot
    std::vector<PipelineStep> schedule;

    // KV cache on the device: per layer (Device), or one layer's staging (HostGpuAttention);
    // kv_slot[il] indexes kv_k and kv_v. Layers the plan recomputes (Device only) keep their
    // saved hidden states in hidden[hidden_slot[il]] and share one more K/V pair, rebuilt
    // before each use from rebuild_list (blocks, rows, positions: n_rebuild each).
    std::vector<DeviceBuffer> kv_k, kv_v, hidden;
    std::vector<int32_t> kv_slot, hidden_slot;
    DeviceBuffer rebuild_list;
    std::vector<RebuildRow> rebuild_rows;
    int64_t n_rebuild = 0;

    // Activations for passes of kMaxUbatch tokens, token-major, and scratch.
    DeviceBuffer x, xn, q, k, v, attn, gate, up, out, x16, w16, logits, ints, tables, scratch;
    std::unique_ptr<HostStaging> host;
    Event ev_inputs, ev_qkv, ev_down[2], ev_up[2], ev_logits;

    Impl(const models::Hparams& h, WeightStore& s, const KvCache& kv, storage::MemoryBudget& dram, const CudaBackendOptions& o);
    void load_weights(storage::MemoryBudget& dram);
    void allocate(const KvCache& kv);
    float* dev_f(const DeviceBuffer& b, int64_t row, int64_t width) const { return b.as<float>() + row * width; }

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

uint64_t CudaBackend::working_bytes(const models::Hparams& hp, uint64_t head_bytes, uint64_t slot_bytes, int n_slots, int n_ctx) {
    const uint64_t ub = kMaxUbatch;
    const uint64_t widest = std::max<uint64_t>({uint64_t(hp.n_embd), uint64_t(hp.n_ff), uint64_t(hp.n_embd_q())});
    const uint64_t floats = ub * (3ull * hp.n_embd + 2ull * hp.n_embd_q() + 2ull * hp.n_embd_kv() + 2ull * hp.n_ff) +
                            kHeadRows * uint64_t(hp.n_vocab);
    const uint64_t halves = ub * widest + uint64_t(hp.n_ff) * std::max(hp.n_embd, hp.n_embd_q());
    const uint64_t blocks = KvCache::blocks_for(n_ctx);
    const uint64_t ints = 4 * ub + ub * blocks + 3 * KvCache::kBlockSize * blocks;  // + the rebuild list
    const uint64_t scratch = gpu::decode_attention_scratch_floats(int32_t(ub), hp.n_head, hp.head_dim, int32_t(blocks));
    return 4 * floats + 2 * halves + 4 * ints + 4 * scratch + head_bytes + uint64_t(n_slots) * slot_bytes + (16u << 20);
}

CudaBackend::Impl::Impl(const models::Hparams& h, WeightStore& s, const KvCache& kv, storage::MemoryBudget& dram,
                        const CudaBackendOptions& o)
    : hp(h), store(s), opts(o), pool(o.gpu_mem, o.device), max_blocks(KvCache::blocks_for(kv.n_ctx())),
      kv_elem(int64_t(row_bytes(kv.type(), 1))), kv_block_elems(int64_t(KvCache::kBlockSize) * h.n_embd_kv()),
      kv_type(kv.type()) {
    if (opts.kv != KvPlacement::HostCpuAttention && !gpu::gpu_kv_type(kv_type))
        throw BackendError(fmt::format("the GPU attention kernels do not read a {} KV cache", dtype_name(kv_type)),
                           "use --kv-type f16, bf16 or f32, or --attention cpu");
    if (kv.n_rebuilt() > 0 && (opts.kv != KvPlacement::Device || h.n_ff < h.n_embd))
        throw BackendError("the CUDA backend recomputes KV from hidden states only with the KV cache on the device",
                           "use a plan without recompute (strata plan --no-recompute)");
    const uint64_t max_rows = uint64_t(kv.pool().n_blocks()) * KvCache::kBlockSize;
    const int64_t ub = kMaxUbatch, E = h.n_embd, Q = h.n_embd_q(), KV = h.n_embd_kv();
    host = std::make_unique<HostStaging>(
        dram, std::vector<uint64_t>{uint64_t(ub * E * 4), uint64_t(4 * ub * 4), uint64_t(ub * max_blocks * 4),
                                    uint64_t(ub * Q * 4), uint64_t(ub * KV * 4), uint64_t(ub * KV * 4), uint64_t(ub * Q * 4),
                                    uint64_t(kHeadRows * h.n_vocab * 4), kv.n_rebuilt() > 0 ? 3 * max_rows * 4 : 0});
    load_weights(dram);
    allocate(kv);
}

void CudaBackend::Impl::load_weights(storage::MemoryBudget& dram) {
    const ModelWeights& w = store.weights();
    if (!gpu::gpu_weight_type(w.output.type))
        throw BackendError(fmt::format("the output head is {}, which the GPU kernels do not read", dtype_name(w.output.type)),
                           "run this model with --gpu-mem 0");
    // The head: output norm, output matrix and rope factors in one buffer.
    const uint64_t norm_bytes = storage::align_up(w.output_norm.info->nbytes, 256);
    const uint64_t out_bytes = storage::align_up(w.output.info->nbytes, 256);
    const uint64_t rope_bytes = w.rope_freqs ? w.rope_freqs.info->nbytes : 0;
    head_buf = pool.allocate(norm_bytes + out_bytes + rope_bytes, "the output head");
    auto* base = head_buf.as<std::byte>();
    gpu::copy_h2d(base, w.output_norm.data, w.output_norm.info->nbytes, streams.h2d);
    gpu::copy_h2d(base + norm_bytes, w.output.data, w.output.info->nbytes, streams.h2d);
    if (w.rope_freqs) gpu::copy_h2d(base + norm_bytes + out_bytes, w.rope_freqs.data, rope_bytes, streams.h2d);
    output_norm = {DType::F32, base, 1, hp.n_embd};
    output = {w.output.type, base + norm_bytes, w.output.n_rows, w.output.n_cols};
    if (w.rope_freqs) rope_freqs = {DType::F32, base + norm_bytes + out_bytes, 1, w.rope_freqs.n_cols};

    // Layers kept on the device: read from the file into a pinned buffer, then copied over.
    const Residency& r = store.residency();
    layers.resize(hp.n_layer);
    layer_bufs.resize(hp.n_layer);
    uint64_t largest = 0;
    for (int il = 0; il < hp.n_layer; ++il) {
        check_types(w.layers[il], il);
        if (r.device(il)) largest = std::max(largest, store.layer_range(il).length);
    }
    if (largest > 0) {
        storage::PinnedPoolOptions po;
        po.slot_bytes = largest;
        po.n_slots = 1;
        po.what = "GPU load buffer";
        storage::PinnedPool staging(dram, po);
        storage::PinnedSlot buf = std::move(*staging.try_acquire());
        for (int il = 0; il < hp.n_layer; ++il) {
            if (!r.device(il)) continue;
            const uint64_t bytes = store.layer_range(il).length;
            layer_bufs[il] = pool.allocate(bytes, fmt::format("layer {}'s weights", il));
            store.read_layer(il, buf.data());
            gpu::copy_h2d(layer_bufs[il].data(), buf.data(), bytes, streams.h2d);
            streams.h2d.synchronize();  // the buffer is reused for the next layer
            layers[il] = rebase(store, il, w.layers[il], layer_bufs[il].as<std::byte>());
        }
    }
    streams.h2d.synchronize();
}

void CudaBackend::Impl::allocate(const KvCache& kv) {
    const Residency& r = store.residency();
    std::vector<bool> on_device(hp.n_layer);
    uint64_t slot_bytes = 0;
    for (int il = 0; il < hp.n_layer; ++il) {
        on_device[il] = r.device(il);
        if (!on_device[il]) slot_bytes = std::max(slot_bytes, store.layer_range(il).length);
    }
    if (slot_bytes > 0) {
        for (int i = 0; i < opts.n_slots; ++i) {
            slots.push_back(pool.allocate(slot_bytes, "buffers for the layers copied in each pass"));
            copied.push_back(std::make_unique<Event>());
            computed.push_back(std::make_unique<Event>());
        }
    }
    schedule = layer_schedule(on_device, std::max(1, opts.n_slots));

    const uint64_t n_blocks = kv.pool().n_blocks();
    const uint64_t layer_kv = n_blocks * uint64_t(kv_block_elems * kv_elem);
    auto add_kv_pair = [&] {
        kv_k.push_back(pool.allocate(layer_kv, "the KV cache (keys)"));
        kv_v.push_back(pool.allocate(layer_kv, "the KV cache (values)"));
        return static_cast<int32_t>(kv_k.size()) - 1;
    };
    kv_slot.assign(hp.n_layer, 0);
    hidden_slot.assign(hp.n_layer, -1);
    if (opts.kv == KvPlacement::Device) {
        for (int il = 0; il < hp.n_layer; ++il) {
            if (!kv.rebuilt(il)) {
                kv_slot[il] = add_kv_pair();
                continue;
            }
            hidden_slot[il] = static_cast<int32_t>(hidden.size());
            hidden.push_back(pool.allocate(n_blocks * KvCache::kBlockSize * uint64_t(hp.n_embd * kv_elem),
                                           "saved hidden states (KV recomputed)"));
        }
        if (!hidden.empty()) {
            const int32_t shared = add_kv_pair();
            for (int il = 0; il < hp.n_layer; ++il)
                if (kv.rebuilt(il)) kv_slot[il] = shared;
            rebuild_list = pool.allocate(3 * n_blocks * KvCache::kBlockSize * 4, "positions to recompute");
        }
    } else if (opts.kv == KvPlacement::HostGpuAttention) {
        add_kv_pair();
    }

    const int64_t ub = kMaxUbatch, E = hp.n_embd, Q = hp.n_embd_q(), KV = hp.n_embd_kv(), F = hp.n_ff;
    auto floats = [&](int64_t n, const char* what) { return pool.allocate(uint64_t(n) * 4, what); };
    x = floats(ub * E, "activations");
    xn = floats(ub * E, "activations");
    out = floats(ub * E, "activations");
    q = floats(ub * Q, "activations");
    attn = floats(ub * Q, "activations");
    k = floats(ub * KV, "activations");
    v = floats(ub * KV, "activations");
    gate = floats(ub * F, "activations");
    up = floats(ub * F, "activations");
    logits = floats(kHeadRows * hp.n_vocab, "logits");
    x16 = pool.allocate(uint64_t(ub) * std::max({E, F, Q}) * 2, "half-precision activations");
    w16 = pool.allocate(uint64_t(F) * std::max(E, Q) * 2, "half-precision weights for prompt matmuls");
    ints = pool.allocate(uint64_t(4 * ub) * 4, "positions and block tables");
    tables = pool.allocate(uint64_t(ub) * max_blocks * 4, "positions and block tables");
    scratch = floats(int64_t(gpu::decode_attention_scratch_floats(int32_t(ub), hp.n_head, hp.head_dim, max_blocks)),
                     "attention scratch");
    STRATA_LOG_INFO("cuda: {} of {} layers on the device, {} copied in per pass through {} buffers of {}; KV cache {}; "
                    "{} of device memory in use",
                    std::count(on_device.begin(), on_device.end(), true), hp.n_layer,
                    std::count(on_device.begin(), on_device.end(), false), slots.size(), format_bytes(slot_bytes),
                    kv_placement_name(opts.kv), format_bytes(pool.arena().used()));
}

void CudaBackend::Impl::matmul(const DevWeight& w, const float* x_rows, float* y_rows, int64_t n) {
    Stream& s = streams.compute;
    if (n <= kGemvRows) {
        for (int64_t t = 0; t < n; ++t)
            gpu::gemv(w.type, w.data, x_rows + t * w.n_cols, y_rows + t * w.n_rows, w.n_rows, w.n_cols, s);
        return;
    }
    gpu::dequantize_f16(w.type, w.data, w16.as<uint16_t>(), w.n_rows, w.n_cols, s);
    gpu::convert_f32_to_f16(x_rows, x16.as<uint16_t>(), n * w.n_cols, s);
    cublas.gemm_f16(w16.as<uint16_t>(), x16.as<uint16_t>(), y_rows, w.n_rows, w.n_cols, n, s);
}

void CudaBackend::Impl::project(const DevWeight& w, const float* x_all, float* y_all, int64_t n, int64_t n_long) {
    if (n_long > 0) matmul(w, x_all, y_all, n_long);
    for (int64_t t = n_long; t < n; ++t) matmul(w, x_all + t * w.n_cols, y_all + t * w.n_rows, 1);
}

// Embeddings (looked up on the host), positions, KV rows and, for GPU attention, one block
// table row and key count per token: one copy each on the H2D stream.
void CudaBackend::Impl::upload_pass(const PassLayout& p, const KvCache& kv) {
    const int64_t n = p.n(), E = hp.n_embd;
    const ModelWeights& w = store.weights();
    float* emb = host->part<float>(kEmbd);
    for (int64_t t = 0; t < n; ++t) dequantize_weight_row(w.tok_embd, p.tokens[t], emb + t * E);
    int32_t* in = host->part<int32_t>(kInts);  // pos, block, row, n_kv: n each
    int32_t* tab = host->part<int32_t>(kTables);
    for (int64_t t = 0; t < n; ++t) {
        in[t] = static_cast<int32_t>(p.pos[t]);
        in[n + t] = p.block[t];
        in[2 * n + t] = p.row[t];
        in[3 * n + t] = static_cast<int32_t>(p.pos[t] + 1);
    }
    for (const auto& seg : p.segments) {
        const auto table = kv.block_table(seg.seq);
        for (int64_t i = 0; i < seg.n; ++i) {
            int32_t* dst = tab + (seg.first + i) * max_blocks;
            std::fill_n(dst, max_blocks, 0);
            std::copy_n(table.begin(), std::min<size_t>(table.size(), size_t(max_blocks)), dst);
        }
    }
    Stream& h2d = streams.h2d;
    if (!hidden.empty()) {
        rows_to_rebuild(kv, p.segments, rebuild_rows);
        n_rebuild = static_cast<int64_t>(rebuild_rows.size());
        int32_t* list = host->part<int32_t>(kRebuild);
        for (int64_t i = 0; i < n_rebuild; ++i) {
            list[i] = rebuild_rows[i].block;
            list[n_rebuild + i] = rebuild_rows[i].row;
            list[2 * n_rebuild + i] = static_cast<int32_t>(rebuild_rows[i].pos);
        }
        if (n_rebuild > 0) gpu::copy_h2d(rebuild_list.data(), list, size_t(3 * n_rebuild) * 4, h2d);
    }
    gpu::copy_h2d(x.data(), emb, size_t(n * E) * 4, h2d);
    gpu::copy_h2d(ints.data(), in, size_t(4 * n) * 4, h2d);
    gpu::copy_h2d(tables.data(), tab, size_t(n * max_blocks) * 4, h2d);
    ev_inputs.record(h2d);
    ev_inputs.wait_on(streams.compute);
    // The host buffers are rewritten by the next pass: wait for the copies before returning.
    ev_inputs.synchronize();
}

gpu::RopeArgs CudaBackend::Impl::rope_args(int32_t n_heads) const {
    gpu::RopeArgs rope;
    rope.n_heads = n_heads;
    rope.head_dim = hp.head_dim;
    rope.n_rot = hp.n_rot;
    rope.freq_base = hp.rope_freq_base;
    rope.freq_scale = hp.rope_freq_scale;
    rope.neox = hp.rope_mode == models::RopeMode::NeoX;
    rope.freq_factors = rope_freqs ? rope_freqs.f32() : nullptr;
    return rope;
}

// KVPR/HCache on the device: the positions the pass attends to but does not compute get K and
// V again from their saved hidden states (runtime/exec/kv_rebuild.h), kMaxUbatch rows at a time,
// in buffers the layer does not use until its attention is done (gate, up, out).
void CudaBackend::Impl::rebuild_kv(int il, const DevLayer& l) {
    Stream& s = streams.compute;
    const int64_t E = hp.n_embd, KV = hp.n_embd_kv();
    const int32_t* list = rebuild_list.as<int32_t>();
    const gpu::RopeArgs rope = rope_args(hp.n_head_kv);
    for (int64_t r0 = 0; r0 < n_rebuild; r0 += kMaxUbatch) {
        const int64_t n = std::min<int64_t>(kMaxUbatch, n_rebuild - r0);
        const int32_t* block = list + r0;
        const int32_t* row = list + n_rebuild + r0;
        const int32_t* pos = list + 2 * n_rebuild + r0;
        gpu::kv_gather(hidden[hidden_slot[il]].data(), kv_type, block, row, n, E, E, KvCache::kBlockSize * E,
                       gate.as<float>(), s);
        matmul(l.wk, gate.as<float>(), up.as<float>(), n);
        matmul(l.wv, gate.as<float>(), out.as<float>(), n);
        if (l.bk) gpu::add_rows(up.as<float>(), l.bk.f32(), n, KV, s);
        if (l.bv) gpu::add_rows(out.as<float>(), l.bv.f32(), n, KV, s);
        gpu::rope(up.as<float>(), pos, n, rope, s);
        gpu::kv_store(up.as<float>(), kv_k[kv_slot[il]].data(), kv_type, block, row, n, KV, KV, kv_block_elems, s);
        gpu::kv_store(out.as<float>(), kv_v[kv_slot[il]].data(), kv_type, block, row, n, KV, KV, kv_block_elems, s);
    }
}

void CudaBackend::Impl::attention_on_device(int il, const DevLayer& l, const PassLayout& p, KvCache& kv) {
    Stream& s = streams.compute;
    const int64_t n = p.n(), KV = hp.n_embd_kv(), E = hp.n_embd;
    const int32_t* block = ints.as<int32_t>() + n;
    const int32_t* row = ints.as<int32_t>() + 2 * n;
    const void* kc = nullptr;
    const void* vc = nullptr;
    if (opts.kv == KvPlacement::Device) {
        if (hidden_slot[il] >= 0) {
            rebuild_kv(il, l);
            gpu::kv_store(xn.as<float>(), hidden[hidden_slot[il]].data(), kv_type, block, row, n, E, E,
                          KvCache::kBlockSize * E, s);
        }
        const int32_t slot = kv_slot[il];
        gpu::kv_store(k.as<float>(), kv_k[slot].data(), kv_type, block, row, n, KV, KV, kv_block_elems, s);
        gpu::kv_store(v.as<float>(), kv_v[slot].data(), kv_type, block, row, n, KV, KV, kv_block_elems, s);
        kc = kv_k[slot].data();
        vc = kv_v[slot].data();
    } else {
        // The host cache is the master copy: the new rows go down into it, then every block the
        // pass reads comes up, at the same block ids, into the staging layer.
        ev_qkv.record(s);
        ev_qkv.wait_on(streams.d2h);
        gpu::copy_d2h(host->part<float>(kK), k.data(), size_t(n * KV) * 4, streams.d2h);
        gpu::copy_d2h(host->part<float>(kV), v.data(), size_t(n * KV) * 4, streams.d2h);
        ev_down[0].record(streams.d2h);
        ev_down[0].synchronize();
        kv.begin_layer(il);
        for (int64_t t = 0; t < n; ++t)
            kv.store(il, p.block[t], p.row[t], host->part<float>(kK) + t * KV, host->part<float>(kV) + t * KV);
        std::vector<int32_t> blocks;
        for (const auto& seg : p.segments) {
            const auto table = kv.block_table(seg.seq);
            blocks.insert(blocks.end(), table.begin(), table.begin() + KvCache::blocks_for(seg.pos0 + seg.n));
        }
        std::sort(blocks.begin(), blocks.end());
        blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
        const size_t bytes = size_t(KvCache::kBlockSize) * size_t(kv.row_bytes());
        const size_t dev_block = size_t(kv_block_elems * kv_elem);
        for (int32_t b : blocks) {
            gpu::copy_h2d(kv_k[0].as<std::byte>() + b * dev_block, kv.k(il, b), bytes, streams.h2d);
            gpu::copy_h2d(kv_v[0].as<std::byte>() + b * dev_block, kv.v(il, b), bytes, streams.h2d);
        }
        ev_up[0].record(streams.h2d);
        ev_up[0].wait_on(s);
        ev_up[0].synchronize();  // a spilled layer's host buffer is reused after end_layer
        kv.end_layer(il, p.dirty);
        kc = kv_k[0].data();
        vc = kv_v[0].data();
    }
    gpu::DecodeAttentionArgs a;
    a.q = q.as<float>();
    a.out = attn.as<float>();
    a.k = kc;
    a.v = vc;
    a.kv_type = kv_type;
    a.block_tables = tables.as<int32_t>();
    a.n_kv = ints.as<int32_t>() + 3 * n;
    a.n_seq = static_cast<int32_t>(n);
    a.max_blocks = max_blocks;
    a.n_head = hp.n_head;
    a.n_head_kv = hp.n_head_kv;
    a.head_dim = hp.head_dim;
    a.kv_stride = KV;
    a.block_stride = kv_block_elems;
    a.scratch = scratch.as<float>();
    gpu::decode_attention(a, s);
}

// FastDecode/NEO: q, k and v go down to the host, the CPU stores k and v in the host cache and
// attends, the result comes back up. The pass is cut in two micro-batches at a segment
// boundary: while the CPU attends for the second, the first's result goes up and its output
// projection runs on the GPU.
void CudaBackend::Impl::attention_on_host(int il, const DevLayer& l, const PassLayout& p, KvCache& kv) {
    Stream& s = streams.compute;
    const int64_t n = p.n(), Q = hp.n_embd_q(), KV = hp.n_embd_kv(), E = hp.n_embd;
    size_t cut = p.segments.size();
    for (size_t i = 1; i < p.segments.size(); ++i)
        if (p.segments[i].first >= n / 2) {
            cut = i;
            break;
        }
    struct Part {
        std::span<const PassLayout::Segment> segs;
        int64_t r0, r1;
    };
    const int64_t mid = cut < p.segments.size() ? p.segments[cut].first : n;
    const Part parts[2] = {{std::span(p.segments).first(cut), 0, mid}, {std::span(p.segments).subspan(cut), mid, n}};
    float* hq = host->part<float>(kQ);
    float* hk = host->part<float>(kK);
    float* hv = host->part<float>(kV);
    float* ha = host->part<float>(kAttn);
    ev_qkv.record(s);
    ev_qkv.wait_on(streams.d2h);
    for (int i = 0; i < 2; ++i) {
        const Part& m = parts[i];
        if (m.r0 == m.r1) continue;
        gpu::copy_d2h(hq + m.r0 * Q, dev_f(q, m.r0, Q), size_t((m.r1 - m.r0) * Q) * 4, streams.d2h);
        gpu::copy_d2h(hk + m.r0 * KV, dev_f(k, m.r0, KV), size_t((m.r1 - m.r0) * KV) * 4, streams.d2h);
        gpu::copy_d2h(hv + m.r0 * KV, dev_f(v, m.r0, KV), size_t((m.r1 - m.r0) * KV) * 4, streams.d2h);
        ev_down[i].record(streams.d2h);
    }
    kv.begin_layer(il);
    for (int i = 0; i < 2; ++i) {
        const Part& m = parts[i];
        if (m.r0 == m.r1) continue;
        ev_down[i].synchronize();
        for (int64_t t = m.r0; t < m.r1; ++t) kv.store(il, p.block[t], p.row[t], hk + t * KV, hv + t * KV);
        attend_on_cpu(hp, kv, il, m.segs, hq, ha);
        gpu::copy_h2d(dev_f(attn, m.r0, Q), ha + m.r0 * Q, size_t((m.r1 - m.r0) * Q) * 4, streams.h2d);
        ev_up[i].record(streams.h2d);
        ev_up[i].wait_on(s);
        // The output projection of this micro-batch, on the GPU while the CPU takes the next.
        const int64_t n_long = std::clamp<int64_t>(p.n_long - m.r0, 0, m.r1 - m.r0);
        project(l.wo, dev_f(attn, m.r0, Q), dev_f(out, m.r0, E), m.r1 - m.r0, n_long);
    }
    kv.end_layer(il, p.dirty);
    // The staging buffers are reused by the next layer.
    ev_up[1].synchronize();
    ev_up[0].synchronize();
}

void CudaBackend::Impl::layer(int il, const DevLayer& l, const PassLayout& p, KvCache& kv) {
    Stream& s = streams.compute;
    const int64_t n = p.n(), E = hp.n_embd, Q = hp.n_embd_q(), KV = hp.n_embd_kv(), F = hp.n_ff;
    gpu::rms_norm(x.as<float>(), l.attn_norm.f32(), xn.as<float>(), n, E, hp.rms_eps, s);
    project(l.wq, xn.as<float>(), q.as<float>(), n, p.n_long);
    project(l.wk, xn.as<float>(), k.as<float>(), n, p.n_long);
    project(l.wv, xn.as<float>(), v.as<float>(), n, p.n_long);
    if (l.bq) gpu::add_rows(q.as<float>(), l.bq.f32(), n, Q, s);
    if (l.bk) gpu::add_rows(k.as<float>(), l.bk.f32(), n, KV, s);
    if (l.bv) gpu::add_rows(v.as<float>(), l.bv.f32(), n, KV, s);
    gpu::rope(q.as<float>(), ints.as<int32_t>(), n, rope_args(hp.n_head), s);
    gpu::rope(k.as<float>(), ints.as<int32_t>(), n, rope_args(hp.n_head_kv), s);
    if (opts.kv == KvPlacement::HostCpuAttention) {
        attention_on_host(il, l, p, kv);
    } else {
        attention_on_device(il, l, p, kv);
        project(l.wo, attn.as<float>(), out.as<float>(), n, p.n_long);
    }
    gpu::add(x.as<float>(), out.as<float>(), n * E, s);
    gpu::rms_norm(x.as<float>(), l.ffn_norm.f32(), xn.as<float>(), n, E, hp.rms_eps, s);
    project(l.gate, xn.as<float>(), gate.as<float>(), n, p.n_long);
    project(l.up, xn.as<float>(), up.as<float>(), n, p.n_long);
    gpu::swiglu(gate.as<float>(), up.as<float>(), n * F, s);
    project(l.down, gate.as<float>(), out.as<float>(), n, p.n_long);
    gpu::add(x.as<float>(), out.as<float>(), n * E, s);
}

CudaBackend::CudaBackend(const models::Hparams& hp, WeightStore& weights, const KvCache& kv, storage::MemoryBudget& dram,
                         const CudaBackendOptions& opts)
    : Backend(hp), impl_(std::make_unique<Impl>(hp, weights, kv, dram, opts)) {}

CudaBackend::~CudaBackend() = default;

void CudaBackend::reserve(int64_t) {}  // everything is sized for kMaxUbatch tokens at construction

void CudaBackend::compute(const PassLayout& p, KvCache& kv) {
    Impl& m = *impl_;
    m.upload_pass(p, kv);
    for (const PipelineStep& step : m.schedule) {
        if (step.kind == PipelineStep::Copy) {
            // The slot's previous layer must be done before its weights are overwritten.
            m.computed[step.slot]->wait_on(m.streams.h2d);
            m.store.acquire(step.layer);
            const WeightStore::HostRange r = m.store.layer_range(step.layer);
            gpu::copy_h2d(m.slots[step.slot].data(), r.data, r.length, m.streams.h2d);
            m.copied[step.slot]->record(m.streams.h2d);
            // A layer streamed from NVMe sits in a ring buffer the store reuses once released.
            if (m.store.residency().streamed(step.layer)) m.copied[step.slot]->synchronize();
            m.store.release(step.layer);
            m.layers[step.layer] = rebase(m.store, step.layer, m.store.weights().layers[step.layer],
                                          m.slots[step.slot].as<std::byte>());
            continue;
        }
        if (step.slot >= 0) m.copied[step.slot]->wait_on(m.streams.compute);
        m.layer(step.layer, m.layers[step.layer], p, kv);
        if (step.slot >= 0) m.computed[step.slot]->record(m.streams.compute);
    }
}

void CudaBackend::head(std::span<const int64_t> rows, float* logits, bool) {
    Impl& m = *impl_;
    Stream& s = m.streams.compute;
    const int64_t E = hp_.n_embd, V = hp_.n_vocab;
    for (size_t r0 = 0; r0 < rows.size(); r0 += kHeadRows) {
        const int64_t nr = std::min<int64_t>(kHeadRows, int64_t(rows.size() - r0));
        for (int64_t i = 0; i < nr; ++i)
            gpu::copy_d2d(m.dev_f(m.xn, i, E), m.dev_f(m.x, rows[r0 + i], E), size_t(E) * 4, s);
        gpu::rms_norm(m.xn.as<float>(), m.output_norm.f32(), m.xn.as<float>(), nr, E, hp_.rms_eps, s);
        // One GEMV per row: a row's logits do not depend on the others.
        for (int64_t i = 0; i < nr; ++i)
            gpu::gemv(m.output.type, m.output.data, m.dev_f(m.xn, i, E), m.dev_f(m.logits, i, V), V, E, s);
        gpu::copy_d2h(m.host->part<float>(kLogits), m.logits.data(), size_t(nr * V) * 4, s);
        m.ev_logits.record(s);
        m.ev_logits.synchronize();
        std::memcpy(logits + r0 * V, m.host->part<float>(kLogits), size_t(nr * V) * 4);
    }
}

}  // namespace strata::runtime
