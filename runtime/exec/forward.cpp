#include "runtime/exec/forward.h"

#include <algorithm>
#include <cmath>

#include "cpu/norm_rope_act.h"
#include "cpu/thread_pool.h"
#include "runtime/exec/attention_pass.h"
#include "runtime/exec/ffn_dense.h"
#include "runtime/exec/qk_prep.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/weights/weight_store.h"

namespace strata::runtime {

Forward::Forward(const models::Hparams& hp, WeightStore& weights)
    : Backend(hp), store_(weights), w_(weights.weights()), rebuilder_(hp) {
    if (hp.moe.enabled()) {
        moe_ = std::make_unique<MoeFfn>(hp);
        moe_->set_expert_cache(weights.expert_cache());
        stats_ = std::make_unique<RoutingStats>(hp.n_layer, hp.moe.n_expert);
    }
}

uint64_t Forward::activation_bytes(const models::Hparams& hp) {
    const uint64_t per_token = 3ull * hp.n_embd + 2ull * hp.n_embd_q() + 2ull * hp.n_embd_kv();
    const uint64_t ffn = hp.moe.enabled() ? MoeFfn::scratch_floats(hp, kMaxUbatch) : 2ull * hp.n_ff * kMaxUbatch;
    return (per_token * kMaxUbatch + ffn) * sizeof(float);
}

void Forward::embed(std::span<const int32_t> tokens) {
    const int64_t E = hp_.n_embd;
    for (size_t t = 0; t < tokens.size(); ++t) {
        float* x = &x_[t * E];
        dequantize_weight_row(w_.tok_embd, tokens[t], x);
        if (hp_.embd_scale != 1.0f)
            for (int64_t i = 0; i < E; ++i) x[i] *= hp_.embd_scale;
    }
}

void Forward::norm_rows(const WeightRef& w, const float* src, float* dst, int64_t n) {
    const int64_t E = hp_.n_embd;
    cpu::parallel_for(n, [&](int64_t t) { cpu::rms_norm(&src[t * E], w.f32(), &dst[t * E], E, hp_.rms_eps); });
}

void Forward::attention(int il, const LayerWeights& l, KvCache& kv, const PassLayout& p) {
    const int64_t n = p.n(), E = hp_.n_embd, Q = hp_.n_embd_q(), KV = hp_.n_embd_kv();
    const cpu::RopeParams rope = layer_rope(hp_, w_, il, kv.n_ctx());
    norm_rows(l.attn_norm, x_.data(), xn_.data(), n);
    // q, k and v from one conversion of xn and one parallel loop (cpu::matmul_many).
    const cpu::MatmulOut qkv[] = {matmul_out(l.wq, q_.data()), matmul_out(l.wk, k_.data()), matmul_out(l.wv, v_.data())};
    mm_.run(qkv, E, xn_.data(), n, p.n_long);
    const bool rebuilt = kv.rebuilt(il);
    if (rebuilt) rebuilder_.rebuild(rebuild_rows_, l, rope, kv, il, mm_.int8_activations());
    cpu::parallel_for(n, [&](int64_t t) {
        prepare_queries(hp_, l, rope, &q_[t * Q], p.pos[t]);
        prepare_keys(hp_, l, rope, &k_[t * KV], p.pos[t]);
        if (l.bv) cpu::add(&v_[t * KV], l.bv.f32(), KV);
        kv.store(il, p.block[t], p.row[t], &k_[t * KV], &v_[t * KV]);
        if (rebuilt) kv.store_hidden(il, p.block[t], p.row[t], &xn_[t * E]);
    });
    attend_on_cpu(hp_, kv, il, p.segments, q_.data(), attn_.data());
    mm_.project(l.wo, attn_.data(), n, out_.data(), p.n_long);
    if (l.attn_post_norm) norm_rows(l.attn_post_norm, out_.data(), out_.data(), n);
    cpu::add(x_.data(), out_.data(), n * E);
}

void Forward::feed_forward(int il, const LayerWeights& l, const PassLayout& p) {
    const int64_t n = p.n();
    norm_rows(l.ffn_norm, x_.data(), xn_.data(), n);
    if (moe_) moe_->run(il, l, mm_, p, xn_.data(), out_.data(), *stats_);
    else gated_ffn(mm_, hp_.ffn_act, {l.ffn_gate, l.ffn_up, l.ffn_down}, xn_.data(), n, p.n_long, gate_.data(), up_.data(), out_.data());
    if (l.ffn_post_norm) norm_rows(l.ffn_post_norm, out_.data(), out_.data(), n);
}

void Forward::reserve(int64_t ub) {
    x_.resize(ub * hp_.n_embd);
    xn_.resize(ub * hp_.n_embd);
    q_.resize(ub * hp_.n_embd_q());
    attn_.resize(ub * hp_.n_embd_q());
    k_.resize(ub * hp_.n_embd_kv());
    v_.resize(ub * hp_.n_embd_kv());
    out_.resize(ub * hp_.n_embd);
    if (moe_) moe_->reserve(ub);
    else gate_.resize(ub * hp_.n_ff), up_.resize(ub * hp_.n_ff);
}

void Forward::layer(int il, KvCache& kv, const PassLayout& p) {
    const LayerWeights& l = store_.acquire(il);
    kv.begin_layer(il);
    attention(il, l, kv, p);
    kv.end_layer(il, p.dirty);
    feed_forward(il, l, p);
    store_.release(il);
    cpu::add(x_.data(), out_.data(), p.n() * hp_.n_embd);
}

void Forward::run_feed_forward(int il, const PassLayout& p) {
    feed_forward(il, store_.acquire(il), p);
    store_.release(il);
    cpu::add(x_.data(), out_.data(), p.n() * hp_.n_embd);
}

void Forward::begin_pass(const PassLayout& p, KvCache& kv) {
    if (kv.n_rebuilt() > 0) rows_to_rebuild(kv, p.segments, rebuild_rows_);
}

void Forward::compute(const PassLayout& p, KvCache& kv) {
    embed(p.tokens);
    begin_pass(p, kv);
    for (int il = 0; il < hp_.n_layer; ++il) layer(il, kv, p);
}

void Forward::hidden(std::span<const int64_t> rows, float* out) {
    const int64_t E = hp_.n_embd;
    for (size_t i = 0; i < rows.size(); ++i) cpu::rms_norm(&x_[rows[i] * E], w_.output_norm.f32(), &out[i * E], E, hp_.rms_eps);
}

void Forward::head(std::span<const int64_t> rows, float* logits, bool one_per_entry) {
    const int64_t V = hp_.n_vocab;
    hidden(rows, xn_.data());
    const int64_t n = static_cast<int64_t>(rows.size());
    // One row per batch entry: each as its sequence alone would compute it (a single row).
    mm_.project(w_.output, xn_.data(), n, logits, one_per_entry ? 0 : n);
    if (const float cap = hp_.final_softcap; cap > 0)
        for (int64_t i = 0; i < n * V; ++i) logits[i] = cap * std::tanh(logits[i] / cap);
}

}  // namespace strata::runtime
