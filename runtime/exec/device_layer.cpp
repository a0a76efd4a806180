// One pass on the device: its inputs uploaded (embeddings looked up on the host, positions,
// KV rows, block tables) and each layer's norms, matmuls, RoPE and SwiGLU on the compute stream.
#include "runtime/exec/device_impl.h"

#include <algorithm>

namespace strata::runtime {

using gpu::Stream;

void project(gpu::Device& dev, gpu::Stream& s, const DevWeight& w, const float* x, float* y, int64_t n, int64_t n_long) {
    auto product = [&](int64_t r0, int64_t r1) {
        dev.matmul({w.type, w.data, x + r0 * w.n_cols, y + r0 * w.n_rows, w.n_rows, w.n_cols, r1 - r0}, s);
    };
    if (n_long > 0) product(0, n_long);
    for (int64_t r = n_long; r < n; r += gpu::Device::kRowWiseRows) product(r, std::min(n, r + gpu::Device::kRowWiseRows));
}

// Embeddings (looked up on the host), positions, KV rows and, for GPU attention, one block
// table row and key count per token: one copy each on the H2D stream.
void DeviceBackend::Impl::upload_pass(const PassLayout& p, const KvCache& kv) {
    const int64_t n = p.n(), E = hp.n_embd;
    const ModelWeights& w = store.weights();
    float* emb = host->embd;
    for (int64_t t = 0; t < n; ++t) dequantize_weight_row(w.tok_embd, p.tokens[t], emb + t * E);
    int32_t* in = host->ints;  // pos, block, row, n_kv: n each
    int32_t* tab = host->tables;
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
    Stream& up_link = *h2d;
    // The previous pass may still be computing on the device buffers these copies overwrite.
    ev_computed->record(*compute);
    ev_computed->wait_on(up_link);
    if (!hidden.empty()) {
        rows_to_rebuild(kv, p.segments, rebuild_rows);
        n_rebuild = static_cast<int64_t>(rebuild_rows.size());
        int32_t* list = host->rebuild;
        for (int64_t i = 0; i < n_rebuild; ++i) {
            list[i] = rebuild_rows[i].block;
            list[n_rebuild + i] = rebuild_rows[i].row;
            list[2 * n_rebuild + i] = static_cast<int32_t>(rebuild_rows[i].pos);
        }
        if (n_rebuild > 0) dev->copy_h2d(rebuild_list.data(), list, size_t(3 * n_rebuild) * 4, up_link);
    }
    dev->copy_h2d(x.data(), emb, size_t(n * E) * 4, up_link);
    dev->copy_h2d(ints.data(), in, size_t(4 * n) * 4, up_link);
    dev->copy_h2d(tables.data(), tab, size_t(n * max_blocks) * 4, up_link);
    ev_inputs->record(up_link);
    ev_inputs->wait_on(*compute);
    // The host buffers are rewritten by the next pass: wait for the copies before returning.
    ev_inputs->synchronize();
}

gpu::RopeArgs DeviceBackend::Impl::rope_args(int32_t n_heads) const {
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

void DeviceBackend::Impl::norm_heads(float* x, const DevWeight& w, int64_t n, int32_t n_heads) {
    if (w) dev->rms_norm(x, w.f32(), x, n * n_heads, hp.head_dim, hp.rms_eps, *compute);
}

void DeviceBackend::Impl::layer(int il, const DevLayer& l, const PassLayout& p, KvCache& kv) {
    Stream& s = *compute;
    const int64_t n = p.n(), E = hp.n_embd, Q = hp.n_embd_q(), KV = hp.n_embd_kv(), F = hp.n_ff;
    dev->rms_norm(x.as<float>(), l.attn_norm.f32(), xn.as<float>(), n, E, hp.rms_eps, s);
    project(l.wq, xn.as<float>(), q.as<float>(), n, p.n_long);
    project(l.wk, xn.as<float>(), k.as<float>(), n, p.n_long);
    project(l.wv, xn.as<float>(), v.as<float>(), n, p.n_long);
    if (l.bq) dev->add_rows(q.as<float>(), l.bq.f32(), n, Q, s);
    if (l.bk) dev->add_rows(k.as<float>(), l.bk.f32(), n, KV, s);
    if (l.bv) dev->add_rows(v.as<float>(), l.bv.f32(), n, KV, s);
    norm_heads(q.as<float>(), l.q_norm, n, hp.n_head);
    norm_heads(k.as<float>(), l.k_norm, n, hp.n_head_kv);
    dev->rope(q.as<float>(), ints.as<int32_t>(), n, rope_args(hp.n_head), s);
    dev->rope(k.as<float>(), ints.as<int32_t>(), n, rope_args(hp.n_head_kv), s);
    if (opts.kv == KvPlacement::HostCpuAttention) {
        attention_on_host(il, l, p, kv);
    } else {
        attention_on_device(il, l, p, kv);
        project(l.wo, attn.as<float>(), out.as<float>(), n, p.n_long);
    }
    dev->add(x.as<float>(), out.as<float>(), n * E, s);
    if (hp.moe.enabled()) return ffn_on_host(il, p);
    dev->rms_norm(x.as<float>(), l.ffn_norm.f32(), xn.as<float>(), n, E, hp.rms_eps, s);
    project(l.gate, xn.as<float>(), gate.as<float>(), n, p.n_long);
    project(l.up, xn.as<float>(), up.as<float>(), n, p.n_long);
    dev->swiglu(gate.as<float>(), up.as<float>(), n, F, s);
    project(l.down, gate.as<float>(), out.as<float>(), n, p.n_long);
    dev->add(x.as<float>(), out.as<float>(), n * E, s);
}

// A layer whose matmuls the plan puts on the CPU: the CPU runs the layer on the pass's hidden
// states (its KV cache in DRAM, attention on the CPU).
void DeviceBackend::Impl::layer_on_cpu(int il, const PassLayout& p, KvCache& kv) {
    on_host(p, [&] { host_layers->run_layer(il, kv, p); });
}

// The copy up needs no wait: the next copy down is ordered after it by the compute stream.
void DeviceBackend::Impl::on_host(const PassLayout& p, const std::function<void()>& run) {
    const size_t bytes = size_t(p.n() * hp.n_embd) * 4;
    float* host_x = host_layers->hidden();
    ev_qkv->record(*compute);
    ev_qkv->wait_on(*d2h);
    dev->copy_d2h(host_x, x.data(), bytes, *d2h);
    ev_down[0]->record(*d2h);
    ev_down[0]->synchronize();
    run();
    dev->copy_h2d(x.data(), host_x, bytes, *h2d);
    ev_up[0]->record(*h2d);
    ev_up[0]->wait_on(*compute);
}

}  // namespace strata::runtime
