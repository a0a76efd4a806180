#include "runtime/forward.h"

#include <algorithm>

#include <fmt/format.h>

#include "cpu/attention_cpu.h"
#include "cpu/matmul.h"
#include "cpu/norm_rope_act.h"
#include "cpu/quant.h"
#include "cpu/thread_pool.h"
#include "runtime/core/error.h"
#include "runtime/kv_cache.h"
#include "runtime/weight_store.h"

namespace strata {

Forward::Forward(const Hparams& hp, WeightStore& weights) : hp_(hp), store_(weights), w_(weights.weights()) {}

uint64_t Forward::activation_bytes(const Hparams& hp) {
    const uint64_t per_token = 3ull * hp.n_embd + 2ull * hp.n_embd_q() + 2ull * hp.n_embd_kv() + 2ull * hp.n_ff;
    return per_token * kMaxUbatch * sizeof(float);
}

void Forward::project(const WeightRef& w, const float* x, int64_t n, float* y) {
    cpu::matmul(w.type, w.data, w.n_rows, w.n_cols, x, n, y, int8_acts_);
}

void Forward::embed(std::span<const int32_t> tokens) {
    const size_t row = row_bytes(w_.tok_embd.type, hp_.n_embd);
    for (size_t t = 0; t < tokens.size(); ++t) {
        const auto* src = static_cast<const std::byte*>(w_.tok_embd.data) + static_cast<size_t>(tokens[t]) * row;
        cpu::dequantize_row(w_.tok_embd.type, src, &x_[t * hp_.n_embd], hp_.n_embd);
    }
}

// xn = rms_norm(x) * w for n token rows, in parallel for a batch.
void Forward::norm_rows(const WeightRef& w, int64_t n) {
    const int64_t E = hp_.n_embd;
    cpu::parallel_for(n, [&](int64_t t) { cpu::rms_norm(&x_[t * E], w.f32(), &xn_[t * E], E, hp_.rms_eps); });
}

void Forward::layer(int il, KvCache& kv, int64_t pos0, int64_t n) {
    const LayerWeights& l = store_.acquire(il);
    kv.begin_layer(il);
    const int64_t E = hp_.n_embd, Q = hp_.n_embd_q(), KV = hp_.n_embd_kv(), F = hp_.n_ff;
    const cpu::RopeParams rope{hp_.head_dim, hp_.n_rot, hp_.rope_freq_base, hp_.rope_freq_scale,
                               hp_.rope_mode == RopeMode::NeoX, w_.rope_freqs ? w_.rope_freqs.f32() : nullptr};

    norm_rows(l.attn_norm, n);
    // q, k and v from one conversion of xn and one parallel loop (cpu::matmul_many).
    const cpu::MatmulOut qkv[] = {{l.wq.type, l.wq.data, l.wq.n_rows, q_.data()},
                                  {l.wk.type, l.wk.data, l.wk.n_rows, k_.data()},
                                  {l.wv.type, l.wv.data, l.wv.n_rows, v_.data()}};
    cpu::matmul_many(qkv, E, xn_.data(), n, int8_acts_);
    cpu::parallel_for(n, [&](int64_t t) {
        if (l.bq) cpu::add(&q_[t * Q], l.bq.f32(), Q);
        if (l.bk) cpu::add(&k_[t * KV], l.bk.f32(), KV);
        if (l.bv) cpu::add(&v_[t * KV], l.bv.f32(), KV);
        cpu::rope(&q_[t * Q], hp_.n_head, pos0 + t, rope);
        cpu::rope(&k_[t * KV], hp_.n_head_kv, pos0 + t, rope);
        std::copy_n(&k_[t * KV], KV, kv.k(il, pos0 + t));
        std::copy_n(&v_[t * KV], KV, kv.v(il, pos0 + t));
    });

    cpu::AttentionArgs a;
    a.q = q_.data();
    a.k = kv.k(il, 0);
    a.v = kv.v(il, 0);
    a.out = attn_.data();
    a.n_tokens = n;
    a.pos0 = pos0;
    a.n_head = hp_.n_head;
    a.n_head_kv = hp_.n_head_kv;
    a.head_dim = hp_.head_dim;
    a.kv_stride = kv.row_stride();
    cpu::attention(a);
    kv.end_layer(il, pos0, n);

    project(l.wo, attn_.data(), n, out_.data());
    cpu::add(x_.data(), out_.data(), n * E);

    norm_rows(l.ffn_norm, n);
    const cpu::MatmulOut gate_up[] = {{l.ffn_gate.type, l.ffn_gate.data, l.ffn_gate.n_rows, gate_.data()},
                                      {l.ffn_up.type, l.ffn_up.data, l.ffn_up.n_rows, up_.data()}};
    cpu::matmul_many(gate_up, E, xn_.data(), n, int8_acts_);
    cpu::parallel_for(n, [&](int64_t t) { cpu::swiglu(&gate_[t * F], &up_[t * F], F); });
    project(l.ffn_down, gate_.data(), n, out_.data());
    store_.release(il);
    cpu::add(x_.data(), out_.data(), n * E);
}

void Forward::eval(std::span<const int32_t> tokens, KvCache& kv, std::vector<float>& logits, bool all_logits) {
    if (tokens.empty()) throw UsageError("nothing to evaluate: the token list is empty");
    if (kv.n_past() + static_cast<int64_t>(tokens.size()) > kv.n_ctx())
        throw UsageError(fmt::format("context is full: {} tokens in the cache + {} new > context size {}", kv.n_past(),
                                     tokens.size(), kv.n_ctx()),
                         "use a shorter prompt, fewer tokens (-n) or a larger context (--ctx)");
    for (int32_t t : tokens)
        if (t < 0 || t >= hp_.n_vocab) throw UsageError(fmt::format("token id {} is outside the vocabulary (0..{})", t, hp_.n_vocab - 1));

    const int64_t E = hp_.n_embd, V = hp_.n_vocab;
    const int64_t ub = std::min<int64_t>(kMaxUbatch, static_cast<int64_t>(tokens.size()));
    x_.resize(ub * E);
    xn_.resize(ub * E);
    q_.resize(ub * hp_.n_embd_q());
    attn_.resize(ub * hp_.n_embd_q());
    k_.resize(ub * hp_.n_embd_kv());
    v_.resize(ub * hp_.n_embd_kv());
    gate_.resize(ub * hp_.n_ff);
    up_.resize(ub * hp_.n_ff);
    out_.resize(ub * E);
    logits.resize((all_logits ? tokens.size() : 1) * V);

    for (size_t start = 0; start < tokens.size(); start += ub) {
        const int64_t n = std::min<int64_t>(ub, static_cast<int64_t>(tokens.size() - start));
        const int64_t pos0 = kv.n_past();
        embed(tokens.subspan(start, n));
        for (int il = 0; il < hp_.n_layer; ++il) layer(il, kv, pos0, n);
        kv.advance(static_cast<int32_t>(n));

        // Only the rows whose logits are wanted go through the output head.
        const int64_t first = all_logits ? 0 : n - 1;
        if (!all_logits && start + n < tokens.size()) continue;
        for (int64_t t = first; t < n; ++t)
            cpu::rms_norm(&x_[t * E], w_.output_norm.f32(), &xn_[(t - first) * E], E, hp_.rms_eps);
        float* dst = all_logits ? &logits[start * V] : logits.data();
        project(w_.output, xn_.data(), n - first, dst);
    }
}

}  // namespace strata
