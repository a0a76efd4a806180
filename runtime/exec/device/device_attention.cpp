// Attention on the device (KV cache there, or copied in per layer from the host cache), and KV
// recomputed on the device from saved hidden states. (The host CPU attending for the device:
// cpu_attention_pipeline.cpp.)
#include "runtime/exec/device/device_impl.h"

#include <algorithm>

#include "planner/model_shape.h"

namespace strata::runtime {

using gpu::Stream;

// KVPR/HCache on the device: the positions the pass attends to but does not compute get K and
// V again from their saved hidden states (runtime/exec/cpu/kv_rebuild.h): the layer program's
// key_value steps, kMaxUbatch rows at a time, in buffers the layer does not use until its
// attention is done (gate for the inputs, up and out for K and V).
static_assert(planner::ModelShape::kPassRows == Backend::kMaxUbatch, "the planner prices passes and rebuild chunks of this many rows");
void DeviceBackend::Impl::rebuild_kv(const LayerProgram& prog, const DevLayer& l, KvCache& kv) {
    const int il = prog.il;
    const int64_t E = hp.n_embd;
    const int32_t* list = rebuild_list.as<int32_t>();
    Rows r;
    r.act[size_t(Act::XN)] = gate.as<float>();
    r.act[size_t(Act::K)] = up.as<float>();
    r.act[size_t(Act::V)] = out.as<float>();
    r.save_inputs = false;
    for (int64_t r0 = 0; r0 < n_rebuild; r0 += kMaxUbatch) {
        // Every row of a chunk in one matmul, as when they were first computed in a prompt.
        r.n = r.n_long = std::min<int64_t>(kMaxUbatch, n_rebuild - r0);
        r.block = list + r0;
        r.row = list + n_rebuild + r0;
        r.pos = list + 2 * n_rebuild + r0;
        const int64_t hidden_block = KvCache::kBlockSize * hidden_row_bytes;
        dev->kv_gather({hidden[hidden_slot[il]].data(), kv_type, r.block, r.row, r.n, E, hidden_row_bytes, hidden_block},
                       gate.as<float>(), *compute);
        run(prog.key_value, prog, l, r, nullptr, kv);
    }
}

// The device layers' copy of a kept draft path: row seq_len + slots[i] to seq_len + i in every
// layer whose cache is the device's, in the order KvCache::keep_path moves the host's.
void DeviceBackend::keep_path(const KvCache& kv, SeqId seq, std::span<const int64_t> slots) {
    Impl& m = *impl_;
    const auto table = kv.block_table(seq);
    const int64_t base = kv.seq_len(seq);
    std::vector<int32_t> from_block, from_row, to_block, to_row;
    for (size_t i = 0; i < slots.size(); ++i) {
        const int64_t from = base + slots[i], to = base + int64_t(i);
        if (from == to) continue;
        from_block.push_back(table[size_t(from / KvCache::kBlockSize)]);
        from_row.push_back(int32_t(from % KvCache::kBlockSize));
        to_block.push_back(table[size_t(to / KvCache::kBlockSize)]);
        to_row.push_back(int32_t(to % KvCache::kBlockSize));
    }
    if (from_block.empty()) return;
    const int64_t n = int64_t(from_block.size()), KV = hp_.n_embd_kv();
    for (int il = 0; il < hp_.n_layer; ++il) {
        if (m.kv_of(il) != KvPlacement::Device) continue;  // the host cache's rows: KvCache::keep_path
        const int32_t slot = m.kv_slot[size_t(il)];
        for (const gpu::DeviceBuffer* cache : {&m.kv_k[size_t(slot)], &m.kv_v[size_t(slot)]}) {
            if (!cache->data()) continue;  // MLA: keys only
            const gpu::KvRows from{cache->data(), m.kv_type, from_block.data(), from_row.data(), n, KV, m.kv_row_bytes, m.kv_block_bytes};
            gpu::KvRows to = from;
            to.block = to_block.data();
            to.row = to_row.data();
            m.dev->kv_move(from, to, *m.compute);
        }
    }
}

void DeviceBackend::copy_blocks(std::span<const KvCache::BlockCopy> copies) {
    Impl& m = *impl_;
    if (copies.empty()) return;
    for (int il = 0; il < hp_.n_layer; ++il) {
        if (m.kv_of(il) != KvPlacement::Device) continue;  // the host cache's blocks: KvCache::unshare
        // A rebuilt layer's saved hidden states, else its keys and values (MLA: keys only).
        const int32_t hidden = m.hidden_slot[size_t(il)];
        std::vector<std::pair<gpu::DeviceBuffer*, int64_t>> caches;
        if (hidden >= 0) {
            caches.emplace_back(&m.hidden[size_t(hidden)], KvCache::kBlockSize * m.hidden_row_bytes);
        } else {
            const int32_t slot = m.kv_slot[size_t(il)];
            for (gpu::DeviceBuffer* cache : {&m.kv_k[size_t(slot)], &m.kv_v[size_t(slot)]})
                if (cache->data()) caches.emplace_back(cache, m.kv_block_bytes);
        }
        for (const auto& [cache, block_bytes] : caches)
            for (const KvCache::BlockCopy& c : copies)
                m.dev->copy_d2d(cache->as<std::byte>() + c.to * block_bytes, cache->as<std::byte>() + c.from * block_bytes,
                                size_t(block_bytes), *m.compute);  // before the passes that read them
    }
}

// Attention into `attn`: the KV cache on the device (its rows stored by the program's StoreKv,
// rebuilt ones recomputed first), or the host cache's blocks the pass reads copied in.
void DeviceBackend::Impl::attention_on_device(const LayerProgram& prog, const DevLayer& l, const PassLayout& p, KvCache& kv,
                                              const float* queries, float* into) {
    Stream& s = *compute;
    const int il = prog.il;
    const int64_t n = p.n(), KV = hp.n_embd_kv();
    const AttentionSpec& spec = prog.attention_spec;
    const bool values_in_keys = spec.values_in_keys;
    const void* kc = nullptr;
    const void* vc = nullptr;
    if (kv_of(il) == KvPlacement::Device) {
        if (hidden_slot[il] >= 0) rebuild_kv(prog, l, kv);
        kc = kv_k[kv_slot[il]].data();
        vc = kv_v[kv_slot[il]].data();
    } else {
        // The host cache is the master copy: the new rows go down into it, then every block the
        // pass reads comes up, at the same block ids, into the staging layer (op offload's own
        // where the device's layers keep their KV cache in kv_k[0] and on).
        const size_t stage = offload_kv >= 0 ? size_t(offload_kv) : 0;
        ev_qkv->record(s);
        ev_qkv->wait_on(*d2h);
        dev->copy_d2h(host->k, k.data(), size_t(n * KV) * 4, *d2h);
        if (!values_in_keys) dev->copy_d2h(host->v, v.data(), size_t(n * KV) * 4, *d2h);  // latent attention: keys only
        ev_down[0]->record(*d2h);
        ev_down[0]->synchronize();
        kv.begin_layer(il);
        for (int64_t t = 0; t < n; ++t)
            kv.store(il, p.block[t], p.row[t], host->k + t * KV, host->v + t * KV);
        std::vector<int32_t> blocks;
        for (const auto& seg : p.segments) {
            const auto table = kv.block_table(seg.seq);
            blocks.insert(blocks.end(), table.begin(), table.begin() + KvCache::blocks_for(seg.pos0 + p.span(seg)));
        }
        std::sort(blocks.begin(), blocks.end());
        blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
        // Runs of consecutive blocks that lie back to back on the host and on the device go up as
        // one copy each: a copy per block cost more than its bytes on the link (a batch of 16 at
        // depth 8192 made 32768 of them a step), and a device's copy has a cost of its own.
        const size_t bytes = size_t(KvCache::kBlockSize) * size_t(kv.row_bytes());
        const bool device_contiguous = size_t(kv_block_bytes) == bytes;
        auto follows = [&](int32_t prev, int32_t b) {
            return device_contiguous && b == prev + 1 && kv.k(il, b) == kv.k(il, prev) + bytes &&
                   (values_in_keys || kv.v(il, b) == kv.v(il, prev) + bytes);
        };
        // (Not behind op offload's copy of a later layer's weights on h2d: the staging layer's
        // last reader, the layer before's attention, was done before its rows came down.)
        gpu::Stream& up = rows_stream();
        for (size_t i = 0; i < blocks.size();) {
            size_t end = i + 1;
            while (end < blocks.size() && follows(blocks[end - 1], blocks[end])) ++end;
            const int32_t b = blocks[i];
            const size_t run = (end - i) * bytes;
            dev->copy_h2d(kv_k[stage].as<std::byte>() + b * kv_block_bytes, kv.k(il, b), run, up);
            if (!values_in_keys) dev->copy_h2d(kv_v[stage].as<std::byte>() + b * kv_block_bytes, kv.v(il, b), run, up);
            i = end;
        }
        ev_up[0]->record(up);
        ev_up[0]->wait_on(s);
        // A spilled layer's ring buffer is reused after end_layer; a resident layer's rows are
        // next written after the next pass's copy down, which the compute stream orders after
        // this attention, and so after these copies.
        if (kv.spilled(il)) ev_up[0]->synchronize();
        kv.end_layer(il, p.dirty);
        kc = kv_k[stage].data();
        vc = kv_v[stage].data();
    }
    gpu::DecodeAttentionArgs a;
    a.q = queries;
    a.out = into;
    a.k = kc;
    a.v = values_in_keys ? kc : vc;
    a.kv_type = kv_type;
    a.block_tables = tables.as<int32_t>();
    a.n_kv = ints.as<int32_t>() + 3 * n;
    a.n_seq = static_cast<int32_t>(n);
    a.max_blocks = max_blocks;
    a.n_head = prog.attention_spec.n_head;
    a.n_head_kv = prog.attention_spec.n_head_kv;
    a.head_dim = prog.attention_spec.head_dim;
    a.row_stride = kv_row_bytes;
    a.block_stride = kv_block_bytes;
    a.scratch = scratch.as<float>();
    a.window = prog.attention_spec.window;
    a.scale = prog.attention_spec.scale;
    a.softcap = prog.attention_spec.softcap;
    a.sinks = spec.sinks ? l[spec.sinks].f32() : nullptr;
    a.v_head_dim = spec.v_head_dim;
    if (mask_words > 0) {  // draft trees' rows through their masks (upload_pass)
        a.tree_mask = masks.as<uint64_t>();
        a.tree_base = ints.as<int32_t>() + 4 * n;
        a.pos = ints.as<int32_t>();
        a.tree_words = mask_words;
    }
    // A prompt chunk's rows go to the device as a run: its tiled prefill kernel where it has one.
    // Generated tokens (a verified draft chain, a replayed reply) stay rows of their own, which the
    // decode kernel attends as their decode steps did: the same bits, whatever the pass holds.
    runs.clear();
    for (const auto& seg : p.segments)
        if (seg.n > 1 && seg.draft < 0 && seg.rows != cpu::AttentionRows::Decode)
            runs.push_back({static_cast<int32_t>(seg.first), static_cast<int32_t>(seg.n)});
    a.runs = runs.data();
    a.n_runs = static_cast<int32_t>(runs.size());
    dev->decode_attention(a, s);
}

}  // namespace strata::runtime
