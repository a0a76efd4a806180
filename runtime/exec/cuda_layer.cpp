// One pass on the device: its inputs uploaded (embeddings looked up on the host, positions,
// KV rows, block tables) and each layer's norms, matmuls, RoPE and SwiGLU on the compute stream.
#include "runtime/exec/cuda_impl.h"

#include <algorithm>

namespace strata::runtime {

using gpu::Stream;

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
    Stream& h2d = streams.h2d;
    if (!hidden.empty()) {
        rows_to_rebuild(kv, p.segments, rebuild_rows);
        n_rebuild = static_cast<int64_t>(rebuild_rows.size());
        int32_t* list = host->rebuild;
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

}  // namespace strata::runtime
