#include "runtime/exec/cpu/cpu_backend.h"

#include "cpu/norm_rope_act.h"
#include "cpu/thread_pool.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/weights/weight_store.h"

namespace strata::runtime {

namespace {
bool hidden_layer(Act a) { return a == Act::Gate || a == Act::Up; }
// Whether any layer has a dense feed-forward (deepseek2's first layers, or every layer).
bool dense_layers(const models::Hparams& hp) { return !hp.moe.enabled() || hp.moe.n_dense_lead > 0; }
}  // namespace

CpuBackend::CpuBackend(const models::Hparams& hp, WeightStore& weights)
    : Backend(hp), store_(weights), w_(weights.weights()) {
    for (size_t a = 0; a < kNumActs; ++a) width_[a] = act_width(hp, static_cast<Act>(a));
    if (hp.moe.enabled()) {
        moe_ = std::make_unique<MoeFfn>(hp);
        moe_->set_expert_cache(weights.expert_cache());
        stats_ = std::make_unique<RoutingStats>(hp.n_layer, hp.moe.n_expert);
    }
}

uint64_t CpuBackend::activation_bytes(const models::Hparams& hp) {
    uint64_t per_token = 0;
    for (size_t a = 0; a < kNumActs; ++a)
        if (!hidden_layer(static_cast<Act>(a))) per_token += uint64_t(act_width(hp, static_cast<Act>(a)));
    const uint64_t dense = dense_layers(hp) ? 2ull * hp.n_ff * kMaxUbatch : 0;
    const uint64_t ffn = dense + (hp.moe.enabled() ? MoeFfn::scratch_floats(hp, kMaxUbatch) : 0);
    return (per_token * kMaxUbatch + ffn) * sizeof(float);
}

void CpuBackend::reserve(int64_t ub) {
    for (size_t a = 0; a < kNumActs; ++a) {
        const Act act = static_cast<Act>(a);
        // A mixture of experts keeps its hidden layer in its own scratch.
        const bool unused = hidden_layer(act) && !dense_layers(hp_);
        acts_[a].resize(unused ? 0 : size_t(ub * width_[a]));
    }
    if (moe_) moe_->reserve(ub);
}

const LayerProgram& CpuBackend::program(int il, const KvCache& kv) {
    if (programs_ctx_ != kv.n_ctx()) {
        programs_ = layer_programs(hp_, w_, kv.n_ctx());
        programs_ctx_ = kv.n_ctx();
    }
    return programs_[static_cast<size_t>(il)];
}

CpuBackend::Rows CpuBackend::pass_rows(const PassLayout& p) {
    Rows r;
    for (size_t a = 0; a < kNumActs; ++a) r.act[a] = acts_[a].data();
    r.n = p.n();
    r.n_long = p.n_long;
    r.pos = p.pos.data();
    r.block = p.block.data();
    r.row = p.row.data();
    return r;
}

void CpuBackend::layer(int il, KvCache& kv, const PassLayout& p) {
    const LayerProgram& prog = program(il, kv);
    const LayerWeights& l = store_.acquire(il);
    const Rows r = pass_rows(p);
    kv.begin_layer(il);
    run(prog.attention, prog, l, r, kv, &p);
    kv.end_layer(il, p.dirty);
    run(prog.feed_forward, prog, l, r, kv, &p);
    store_.release(il);
}

void CpuBackend::run_experts(int il, const PassLayout& p) {
    moe_->run(il, store_.acquire(il), mm_, p, act(Act::XN), act(Act::Out), *stats_);
    store_.release(il);
}

void CpuBackend::begin_pass(const PassLayout& p, KvCache& kv) {
    if (kv.n_rebuilt() > 0) rows_to_rebuild(kv, p.segments, rebuild_rows_);
}

void CpuBackend::compute(const PassLayout& p, KvCache& kv) {
    embed_rows(hp_, w_, p.tokens, act(Act::X));
    begin_pass(p, kv);
    const int layers = exit_ > 0 ? exit_ : hp_.n_layer;
    for (int il = 0; il < layers; ++il) layer(il, kv, p);
}

void CpuBackend::hidden(std::span<const int64_t> rows, float* out) {
    const int64_t E = hp_.n_embd;
    const float* x = act(Act::X);
    for (size_t i = 0; i < rows.size(); ++i) cpu::rms_norm(&x[rows[i] * E], w_.output_norm.f32(), &out[i * E], E, hp_.rms_eps);
}

void CpuBackend::head(std::span<const int64_t> rows, float* logits, int64_t n_long) {
    const int64_t V = hp_.n_vocab;
    float* xn = act(Act::XN);
    hidden(rows, xn);
    const int64_t n = static_cast<int64_t>(rows.size());
    mm_.project(w_.output, xn, n, logits, n_long);
    if (hp_.final_softcap > 0) cpu::softcap(logits, n * V, hp_.final_softcap);
}

}  // namespace strata::runtime
