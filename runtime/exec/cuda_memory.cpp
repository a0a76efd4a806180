// What the CUDA backend holds on the device besides weights: the streaming slots, the KV
// cache (or its staging layer), saved hidden states, activations and scratch; and the host
// staging it copies through.
#include "runtime/exec/cuda_impl.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "storage/budget.h"

namespace strata::runtime {

uint64_t CudaBackend::working_bytes(const models::Hparams& hp, uint64_t head_bytes, uint64_t slot_bytes, int n_slots, int n_ctx) {
    const uint64_t ub = kMaxUbatch;
    const uint64_t widest = std::max<uint64_t>({uint64_t(hp.n_embd), uint64_t(hp.n_ff), uint64_t(hp.n_embd_q())});
    const uint64_t floats = ub * (3ull * hp.n_embd + 2ull * hp.n_embd_q() + 2ull * hp.n_embd_kv() + 2ull * hp.n_ff) +
                            Impl::kHeadRows * uint64_t(hp.n_vocab);
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
    HostStaging::Sizes sizes;
    sizes.embd = uint64_t(ub * E * 4);
    sizes.ints = uint64_t(4 * ub * 4);
    sizes.tables = uint64_t(ub * max_blocks * 4);
    sizes.q = sizes.attn = uint64_t(ub * Q * 4);
    sizes.k = sizes.v = uint64_t(ub * KV * 4);
    sizes.logits = uint64_t(kHeadRows * h.n_vocab * 4);
    sizes.rebuild = kv.n_rebuilt() > 0 ? 3 * max_rows * 4 : 0;
    host = std::make_unique<HostStaging>(dram, sizes);
    load_weights(dram);
    allocate(kv);
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
            copied.push_back(std::make_unique<gpu::Event>());
            computed.push_back(std::make_unique<gpu::Event>());
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

}  // namespace strata::runtime
