#include "runtime/exec/forward.h"

#include <algorithm>

#include "cpu/matmul.h"
#include "cpu/norm_rope_act.h"
#include "cpu/onednn_matmul.h"
#include "cpu/quant.h"
#include "cpu/thread_pool.h"
#include "runtime/exec/attention_pass.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/weights/weight_store.h"

namespace strata::runtime {

Forward::Forward(const models::Hparams& hp, WeightStore& weights)
    : Backend(hp), store_(weights), w_(weights.weights()), rebuilder_(hp) {}

uint64_t Forward::activation_bytes(const models::Hparams& hp) {
    const uint64_t per_token = 3ull * hp.n_embd + 2ull * hp.n_embd_q() + 2ull * hp.n_embd_kv() + 2ull * hp.n_ff;
    return per_token * kMaxUbatch * sizeof(float);
}

namespace {
// cpu::matmul gives a token row the same bits whatever the other rows of the call for
// block-quantized weights (int8 activations, integer dot products: tests/unit/runtime/
// test_forward.cpp); with float activations its decode (<= 4 rows) and prefill strategies
// round differently, each giving the same bits for a row whatever the others of its kind.
bool batch_invariant(DType w) { return cpu::act_format_for(w) == cpu::ActFormat::Q8x2; }
}  // namespace

void Forward::matmul(std::span<const cpu::MatmulOut> outs, int64_t n_cols, const float* x, int64_t n, int64_t n_long) {
    // bf16 prompt matmuls (opt-in) would round a pass's decode rows with its prompt rows.
    bool invariant = !cpu::bf16_prefill_enabled();
    for (const auto& o : outs) invariant &= batch_invariant(o.wtype);
    if (invariant || n <= kDecodeRows) return cpu::matmul_many(outs, n_cols, x, n, int8_acts_);
    // Rows [0, n_long) belong to segments of more than kDecodeRows tokens, as a pass of that
    // sequence alone would run them; the rest to short segments: kDecodeRows at a time.
    cpu::MatmulOut part[8];
    auto run = [&](int64_t r0, int64_t r1) {
        for (size_t i = 0; i < outs.size(); ++i) {
            part[i] = outs[i];
            part[i].y = outs[i].y + r0 * outs[i].n_rows;
        }
        cpu::matmul_many({part, outs.size()}, n_cols, x + r0 * n_cols, r1 - r0, int8_acts_);
    };
    if (n_long > 0) run(0, n_long);
    for (int64_t r = n_long; r < n; r += kDecodeRows) run(r, std::min(n, r + kDecodeRows));
}

void Forward::project(const WeightRef& w, const float* x, int64_t n, float* y, int64_t n_long) {
    const cpu::MatmulOut out = matmul_out(w, y);
    matmul({&out, 1}, w.n_cols, x, n, n_long);
}

void Forward::embed(std::span<const int32_t> tokens) {
    for (size_t t = 0; t < tokens.size(); ++t) dequantize_weight_row(w_.tok_embd, tokens[t], &x_[t * hp_.n_embd]);
}

// xn = rms_norm(x) * w for n token rows, in parallel for a batch.
void Forward::norm_rows(const WeightRef& w, int64_t n) {
    const int64_t E = hp_.n_embd;
    cpu::parallel_for(n, [&](int64_t t) { cpu::rms_norm(&x_[t * E], w.f32(), &xn_[t * E], E, hp_.rms_eps); });
}

void Forward::layer(int il, KvCache& kv, const PassLayout& p) {
    const int64_t n = p.n(), n_long = p.n_long;
    const LayerWeights& l = store_.acquire(il);
    kv.begin_layer(il);
    const int64_t E = hp_.n_embd, Q = hp_.n_embd_q(), KV = hp_.n_embd_kv(), F = hp_.n_ff;
    const cpu::RopeParams rope{hp_.head_dim, hp_.n_rot, hp_.rope_freq_base, hp_.rope_freq_scale,
                               hp_.rope_mode == models::RopeMode::NeoX, w_.rope_freqs ? w_.rope_freqs.f32() : nullptr};

    norm_rows(l.attn_norm, n);
    // q, k and v from one conversion of xn and one parallel loop (cpu::matmul_many).
    const cpu::MatmulOut qkv[] = {matmul_out(l.wq, q_.data()), matmul_out(l.wk, k_.data()), matmul_out(l.wv, v_.data())};
    matmul(qkv, E, xn_.data(), n, n_long);
    const bool rebuilt = kv.rebuilt(il);
    if (rebuilt) rebuilder_.rebuild(rebuild_rows_, l, rope, kv, il, int8_acts_);
    cpu::parallel_for(n, [&](int64_t t) {
        if (l.bq) cpu::add(&q_[t * Q], l.bq.f32(), Q);
        if (l.bk) cpu::add(&k_[t * KV], l.bk.f32(), KV);
        if (l.bv) cpu::add(&v_[t * KV], l.bv.f32(), KV);
        cpu::rope(&q_[t * Q], hp_.n_head, p.pos[t], rope);
        cpu::rope(&k_[t * KV], hp_.n_head_kv, p.pos[t], rope);
        kv.store(il, p.block[t], p.row[t], &k_[t * KV], &v_[t * KV]);
        if (rebuilt) kv.store_hidden(il, p.block[t], p.row[t], &xn_[t * E]);
    });
    attend_on_cpu(hp_, kv, il, p.segments, q_.data(), attn_.data());
    kv.end_layer(il, p.dirty);

    project(l.wo, attn_.data(), n, out_.data(), n_long);
    cpu::add(x_.data(), out_.data(), n * E);

    norm_rows(l.ffn_norm, n);
    const cpu::MatmulOut gate_up[] = {matmul_out(l.ffn_gate, gate_.data()), matmul_out(l.ffn_up, up_.data())};
    matmul(gate_up, E, xn_.data(), n, n_long);
    cpu::parallel_for(n, [&](int64_t t) { cpu::swiglu(&gate_[t * F], &up_[t * F], F); });
    project(l.ffn_down, gate_.data(), n, out_.data(), n_long);
    store_.release(il);
    cpu::add(x_.data(), out_.data(), n * E);
}

void Forward::reserve(int64_t ub) {
    x_.resize(ub * hp_.n_embd);
    xn_.resize(ub * hp_.n_embd);
    q_.resize(ub * hp_.n_embd_q());
    attn_.resize(ub * hp_.n_embd_q());
    k_.resize(ub * hp_.n_embd_kv());
    v_.resize(ub * hp_.n_embd_kv());
    gate_.resize(ub * hp_.n_ff);
    up_.resize(ub * hp_.n_ff);
    out_.resize(ub * hp_.n_embd);
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
    hidden(rows, xn_.data());
    const int64_t n = static_cast<int64_t>(rows.size());
    // One row per batch entry: each as its sequence alone would compute it (a single row).
    project(w_.output, xn_.data(), n, logits, one_per_entry ? 0 : n);
}

}  // namespace strata::runtime
