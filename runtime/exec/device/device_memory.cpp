// What the device backend holds on the device besides weights: the streaming slots, the KV
// cache (or its staging layer), saved hidden states, activations and scratch; and the host
// staging it copies through.
#include "runtime/exec/device/device_impl.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "storage/budget.h"

namespace strata::runtime {

namespace {
// The largest weight matrix and activation block a prompt-sized matmul of a pass takes.
// The largest matmul input: a pass's rows of the widest activation a weight reads.
std::pair<int64_t, int64_t> matmul_sizes(const models::Hparams& hp) {
    return {Backend::kMaxUbatch, std::max({int64_t(hp.n_embd), int64_t(hp.n_ff), int64_t(hp.n_embd_q())})};
}
// The gate and up buffers' width: the hidden layer, or a KV rebuild's inputs and keys
// (device_attention.cpp: rebuild_kv).
int64_t hidden_width(const models::Hparams& hp) { return std::max({int64_t(hp.n_ff), int64_t(hp.n_embd), int64_t(hp.n_embd_kv())}); }
// The key heads attention reads: MLA's are its cache rows.
int32_t attention_head_dim(const models::Hparams& hp) { return hp.mla.enabled() ? hp.n_embd_kv() : hp.head_dim; }
}  // namespace

HostStaging::Sizes DeviceBackend::Impl::staging_sizes(const models::Hparams& h, int32_t max_blocks, uint64_t rebuild_rows) {
    const int64_t ub = Backend::kMaxUbatch, E = h.n_embd, Q = h.n_embd_q(), KV = h.n_embd_kv();
    HostStaging::Sizes sizes;
    sizes.embd = uint64_t(ub * E * 4);
    sizes.ints = uint64_t(kPassInts * ub * 4);
    sizes.tables = uint64_t(ub * max_blocks * 4);
    sizes.masks = uint64_t(ub * kMaskWords * 8);
    sizes.q = sizes.attn = uint64_t(ub * Q * 4);
    sizes.k = sizes.v = uint64_t(ub * KV * 4);
    sizes.logits = uint64_t(kHeadRows * h.n_vocab * 4);
    sizes.rebuild = 3 * rebuild_rows * 4;
    return sizes;
}

uint64_t DeviceBackend::Impl::working_bytes(const gpu::Device& device, const models::Hparams& hp, uint64_t head_bytes,
                                           uint64_t slot_bytes, int n_slots, int n_ctx) {
    const uint64_t ub = Backend::kMaxUbatch;
    const uint64_t mla = uint64_t(act_width(hp, Act::QLowRank) + act_width(hp, Act::QLatent) + act_width(hp, Act::AttnLatent));
    const uint64_t floats = ub * (3ull * hp.n_embd + 2ull * hp.n_embd_q() + 2ull * hp.n_embd_kv() + 2ull * uint64_t(hidden_width(hp)) + mla) +
                            kHeadRows * uint64_t(hp.n_vocab);
    const uint64_t blocks = KvCache::blocks_for(n_ctx);
    const uint64_t ints = kPassInts * ub + ub * blocks + 2 * ub * kMaskWords + 3 * KvCache::kBlockSize * blocks;  // + the masks, the rebuild list
    const uint64_t scratch = device.attention_scratch_floats(int32_t(ub), hp.n_head, attention_head_dim(hp), int32_t(blocks));
    const auto [max_rows, max_cols] = matmul_sizes(hp);
    return 4 * floats + 4 * ints + 4 * scratch + device.matmul_scratch_bytes(max_rows, max_cols) + head_bytes +
           uint64_t(n_slots) * slot_bytes + (16u << 20);
}

DeviceFootprint DeviceBackend::host_footprint(const models::Hparams& hp, int n_ctx, uint64_t largest_layer_bytes) {
    DeviceFootprint f;
    f.staging = ring_bytes(HostStaging::slot_bytes(Impl::staging_sizes(hp, KvCache::blocks_for(n_ctx), 0)), 1);
    f.load_buffer = ring_bytes(largest_layer_bytes, 1);  // as load_weights charges it (device_weights.cpp)
    return f;
}

DeviceFootprint DeviceBackend::footprint(const gpu::Device& device, const models::Hparams& hp, const ModelWeights& w,
                                         int n_ctx, uint64_t largest_layer_bytes) {
    const uint64_t head = row_bytes(w.output.type, hp.n_embd) * uint64_t(w.output.n_rows);
    DeviceFootprint f = host_footprint(hp, n_ctx, largest_layer_bytes);
    f.working_streamed = Impl::working_bytes(device, hp, head, largest_layer_bytes, 2, n_ctx);
    f.working_resident = Impl::working_bytes(device, hp, head, 0, 0, n_ctx);
    if (!hp.moe.enabled()) return f;
    f.attention_weights = Impl::non_expert_bytes(w);
    // Routed experts the device may hold: SwiGLU experts (gpt-oss's clamped and biased too) in a type its kernels read.
    // (The last layer has experts: deepseek2's dense layers come first.)
    f.experts_fit = hp.ffn_act != models::FfnAct::GeluTanh && device.supports_weight(w.layers.back().ffn_up_exps.type);
    for (const LayerWeights& l : w.layers) f.expert_bytes = std::max(f.expert_bytes, DeviceExperts::expert_bytes(l));
    f.expert_staging = DeviceExperts::staging_bytes(hp);
    f.expert_scratch = DeviceExperts::scratch_bytes(hp);
    return f;
}

DeviceBackend::Impl::Impl(std::unique_ptr<gpu::Device> device, const models::Hparams& h, WeightStore& s, const KvCache& kv,
                          storage::MemoryBudget& dram, const DeviceBackendOptions& o)
    : hp(h), store(s), opts(o), dev(std::move(device)), compute(dev->make_stream("compute")), h2d(dev->make_stream("h2d")),
      d2h(dev->make_stream("d2h")), max_blocks(KvCache::blocks_for(kv.n_ctx())), kv_type(kv.type()),
      kv_row_bytes(int64_t(row_bytes(kv.type(), h.n_embd_kv()))), kv_block_bytes(KvCache::kBlockSize * kv_row_bytes),
      hidden_row_bytes(int64_t(row_bytes(kv.type(), h.n_embd))), programs(layer_programs(h, s.weights(), kv.n_ctx())), dram(dram) {
    if (opts.kv != KvPlacement::HostCpuAttention && !dev->supports_kv(kv_type))
        throw BackendError(fmt::format("{}'s attention does not read a {} KV cache", dev->name(), dtype_name(kv_type)),
                           "use --kv-type f16, bf16 or f32, or --attention cpu");
    if (kv.n_rebuilt() > 0 && (opts.kv != KvPlacement::Device || h.n_ff < h.n_embd))
        throw BackendError("the device backend recomputes KV from hidden states only with the KV cache on the device",
                           "use a plan without recompute (strata plan --no-recompute)");
    for (auto* e : {&ev_computed, &ev_inputs, &ev_qkv, &ev_down[0], &ev_down[1], &ev_up[0], &ev_up[1], &ev_logits, &ev_ready[0], &ev_ready[1]}) *e = dev->make_event();
    const uint64_t max_rows = uint64_t(kv.pool().n_blocks()) * KvCache::kBlockSize;
    host = std::make_unique<HostStaging>(dram, staging_sizes(h, max_blocks, kv.n_rebuilt() > 0 ? max_rows : 0));
    load_weights(dram);
    allocate(kv, dram);
}

DeviceBackend::Impl::~Impl() {
    for (gpu::Stream* s : {compute.get(), h2d.get(), d2h.get(), rows_up.get()}) {
        if (!s) continue;
        try {
            s->synchronize();
        } catch (const std::exception& e) {
            STRATA_LOG_WARN("{}: queued work failed while shutting down: {}", dev->name(), e.what());
        }
    }
    store.drop_as_read();  // op offload's pinned buffers go with the backend
}

std::vector<LayerWork> DeviceBackend::Impl::layer_work() const {
    const Residency& r = store.residency();
    std::vector<LayerWork> work(hp.n_layer);
    // A mixture of experts keeps every layer's attention on the device (device_moe.cpp).
    if (hp.moe.enabled()) return work;
    for (int il = 0; il < hp.n_layer; ++il)
        work[il] = {r.device(il) ? LayerSite::Device : r.cpu(il) ? LayerSite::Cpu : LayerSite::CopiedIn, r.streamed(il)};
    return work;
}

void DeviceBackend::Impl::host_layers_needed() {
    if (host_layers) return;
    host_layers = std::make_unique<CpuBackend>(hp, store);
    host_layers->set_int8_activations(opts.int8_activations);
    host_layers->prepare(kMaxUbatch);
}

void DeviceBackend::Impl::allocate(const KvCache& kv, storage::MemoryBudget& dram) {
    const Residency& r = store.residency();
    const std::vector<LayerWork> work = layer_work();
    const auto count = [&](LayerSite site) {
        return std::count_if(work.begin(), work.end(), [&](const LayerWork& w) { return w.site == site; });
    };
    // Op offload copies the CPU layers in as well, through the same slots (the run's layout
    // reserved two slots of the largest layer whatever the plan), but those whose KV the host
    // rebuilds from the hidden states it saves (prepare_op_offload); a mixture of experts'
    // slots are op offload's own (prepare_expert_op_offload).
    const auto offloadable = [&](int il) { return work[size_t(il)].site == LayerSite::Cpu && !kv.rebuilt(il); };
    bool any_offloadable = false;
    for (int il = 0; il < hp.n_layer; ++il) any_offloadable = any_offloadable || offloadable(il);
    const bool offload = opts.op_offload_rows > 0 && (any_offloadable || hp.moe.enabled());
    if (opts.op_offload_rows > 0 && !offload)
        STRATA_LOG_WARN("op offload: not run: every CPU layer rebuilds its KV cache on the host, which a device's pass "
                        "would not save");
    uint64_t slot_bytes = 0;
    for (int il = 0; il < hp.n_layer; ++il)
        if (work[il].site == LayerSite::CopiedIn || (offload && offloadable(il)))
            slot_bytes = std::max(slot_bytes, store.layer_range(il).length);
    if (slot_bytes > 0) {
        for (int i = 0; i < opts.n_slots; ++i) {
            slots.push_back(dev->memory().allocate(slot_bytes, "buffers for the layers copied in each pass"));
            copied.push_back(dev->make_event());
            computed.push_back(dev->make_event());
        }
    }
    schedule = layer_schedule(work, std::max(1, opts.n_slots));
    if (count(LayerSite::Cpu) > 0 || hp.moe.enabled()) host_layers_needed();

    const uint64_t n_blocks = kv.pool().n_blocks();
    const uint64_t layer_kv = n_blocks * uint64_t(kv_block_bytes);
    // Latent attention (MLA) reads its values from the key rows: no value rows to hold.
    auto add_kv_pair = [&] {
        kv_k.push_back(dev->memory().allocate(layer_kv, "the KV cache (keys)"));
        kv_v.push_back(hp.mla.enabled() ? gpu::DeviceBuffer{} : dev->memory().allocate(layer_kv, "the KV cache (values)"));
        return static_cast<int32_t>(kv_k.size()) - 1;
    };
    kv_slot.assign(hp.n_layer, 0);
    hidden_slot.assign(hp.n_layer, -1);
    if (opts.kv == KvPlacement::Device) {
        for (int il = 0; il < hp.n_layer; ++il) {
            if (r.cpu(il)) continue;  // its KV cache is the host's
            if (!kv.rebuilt(il)) {
                kv_slot[il] = add_kv_pair();
                continue;
            }
            hidden_slot[il] = static_cast<int32_t>(hidden.size());
            hidden.push_back(dev->memory().allocate(n_blocks * KvCache::kBlockSize * uint64_t(hidden_row_bytes),
                                                    "saved hidden states (KV recomputed)"));
        }
        if (!hidden.empty()) {
            const int32_t shared = add_kv_pair();
            for (int il = 0; il < hp.n_layer; ++il)
                if (kv.rebuilt(il) && !r.cpu(il)) kv_slot[il] = shared;
            rebuild_list = dev->memory().allocate(3 * n_blocks * KvCache::kBlockSize * 4, "positions to recompute");
        }
    } else if (opts.kv == KvPlacement::HostGpuAttention || dev->supports_kv(kv_type)) {
        add_kv_pair();
    }

    const int64_t ub = kMaxUbatch, E = hp.n_embd, Q = hp.n_embd_q(), KV = hp.n_embd_kv();
    auto floats = [&](int64_t n, const char* what) { return dev->memory().allocate(uint64_t(n) * 4, what); };
    const auto [max_rows, max_cols] = matmul_sizes(hp);
    dev->reserve_matmul(max_rows, max_cols);
    x = floats(ub * E, "activations");
    xn = floats(ub * E, "activations");
    out = floats(ub * E, "activations");
    q = floats(ub * Q, "activations");
    attn = floats(ub * std::max(Q, act_width(hp, Act::Attn)), "activations");
    // MLA's low-rank queries, queries in the latent space and attention's output there.
    if (hp.mla.enabled()) {
        q_low_rank = floats(ub * std::max<int64_t>(1, act_width(hp, Act::QLowRank)), "activations");
        q_latent = floats(ub * act_width(hp, Act::QLatent), "activations");
        attn_latent = floats(ub * act_width(hp, Act::AttnLatent), "activations");
    }
    k = floats(ub * KV, "activations");
    v = floats(ub * KV, "activations");
    gate = floats(ub * hidden_width(hp), "activations");
    up = floats(ub * hidden_width(hp), "activations");
    logits = floats(kHeadRows * hp.n_vocab, "logits");
    ints = dev->memory().allocate(uint64_t(kPassInts * ub) * 4, "positions and block tables");
    tables = dev->memory().allocate(uint64_t(ub) * max_blocks * 4, "positions and block tables");
    masks = dev->memory().allocate(uint64_t(ub * kMaskWords) * 8, "draft tree masks");
    scratch = floats(int64_t(dev->attention_scratch_floats(int32_t(ub), hp.n_head, attention_head_dim(hp), max_blocks)),
                     "attention scratch");
    if (std::any_of(opts.experts.begin(), opts.experts.end(), [](const auto& l) { return !l.empty(); })) {
        make_device_experts(opts.experts);
    }
    // Last, so that op offload (a faster prefill) takes only what the plan's layers leave.
    const uint64_t as_read_bytes = offload ? prepare_op_offload(work, kv, add_kv_pair, dram) : 0;
    const std::string offloaded =
        !offload_schedule.empty() ? fmt::format(" (copied in and computed here in passes of {}+ prompt rows, in the file's layout through {} "
                              "of pinned buffers)",
                              opts.op_offload_rows, format_bytes(as_read_bytes))
                : "";
    if (hp.moe.enabled()) {  // its layers and op offload logged as loaded and prepared
        STRATA_LOG_INFO("{}: KV cache {}; {} of device memory in use", dev->name(), kv_placement_name(opts.kv),
                        format_bytes(dev->memory().arena().used()));
        return;
    }
    STRATA_LOG_INFO("{}: {} of {} layers on the device, {} copied in per pass through {} buffers of {}, {} on the CPU{}; "
                    "KV cache {}; {} of device memory in use",
                    dev->name(), count(LayerSite::Device), hp.n_layer, count(LayerSite::CopiedIn), slots.size(),
                    format_bytes(slot_bytes), count(LayerSite::Cpu), offloaded, kv_placement_name(opts.kv),
                    format_bytes(dev->memory().arena().used()));
}

uint64_t DeviceBackend::Impl::prepare_op_offload(std::span<const LayerWork> work, const KvCache& kv,
                                                 const std::function<int32_t()>& add_kv_pair, storage::MemoryBudget& dram) {
    if (hp.moe.enabled()) return prepare_expert_op_offload(dram);
    // A CPU layer whose KV the host rebuilds stays there: its prompt rows' hidden states are
    // what the host keeps (and its K/V slot is shared), which the device's pass would not save.
    std::vector<bool> rebuilt(size_t(hp.n_layer));
    for (int il = 0; il < hp.n_layer; ++il) rebuilt[size_t(il)] = kv.rebuilt(il);
    const std::vector<LayerWork> offloaded = op_offloaded(work, rebuilt);
    // The CPU keeps its resident layers in its kernels' tiles: the device's copies are in the
    // file's layout, rebuilt from DRAM (or read from the file) into pinned buffers.
    std::vector<int> as_read;
    for (int il = 0; il < hp.n_layer; ++il)
        if (work[il].site == LayerSite::Cpu && offloaded[size_t(il)].site == LayerSite::CopiedIn && store.residency().resident[il])
            as_read.push_back(il);
    offload_schedule = layer_schedule(offloaded, std::max(1, opts.n_slots));
    try {
        // The CPU layers' K/V stay in DRAM; with the device's own layers' KV cache on the device,
        // the blocks they attend to come up into a pair of their own.
        if (opts.kv == KvPlacement::Device) offload_kv = add_kv_pair();
        return as_read.empty() ? 0 : store.stage_as_read(std::move(as_read), std::max(1, opts.n_slots), dram);
    } catch (const OutOfBudget& e) {
        return op_offload_failed(e, "the CPU layers prefill on the CPU");
    }
}

uint64_t DeviceBackend::Impl::op_offload_failed(const OutOfBudget& e, std::string_view instead) {
    // Prefill is slower without it, never wrong: the run goes on.
    STRATA_LOG_WARN("op offload: {}; {} (a larger --dram or --gpu-mem makes room; --op-offload off skips it)", e.what(),
                    instead);
    drop_op_offload();
    return 0;
}

void DeviceBackend::Impl::drop_op_offload() {
    offload_schedule.clear();
    // The rebuilt layers' buffers go: no copy may still read them.
    for (const int slot : rebuild_copies)
        if (slot >= 0) copied[size_t(slot)]->synchronize();
    rebuild_copies.clear();
    store.drop_as_read();
    drop_expert_op_offload();
    if (offload_kv < 0) return;
    kv_k[size_t(offload_kv)].reset();
    kv_v[size_t(offload_kv)].reset();
    offload_kv = -1;
}

}  // namespace strata::runtime
