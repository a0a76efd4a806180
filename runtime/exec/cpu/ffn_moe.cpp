#include "runtime/exec/cpu/ffn_moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "cpu/norm_rope_act.h"
#include "cpu/thread_pool.h"
#include "runtime/exec/cpu/ffn_dense.h"

namespace strata::runtime {

uint64_t MoeFfn::scratch_floats(const models::Hparams& hp, int64_t n) {
    const models::MoeParams& m = hp.moe;
    // y_ holds every chosen expert's output rows (n_expert_used per row) until they are added.
    const uint64_t per_row =
        2ull * m.n_expert + 2ull * m.n_expert_used + (2ull + m.n_expert_used) * hp.n_embd + 2ull * hp.n_ff_max();
    return per_row * n + m.n_expert + 1;
}

void MoeFfn::reserve(int64_t n) {
    const models::MoeParams& m = hp_.moe;
    logits_.resize(n * m.n_expert);
    chosen_.resize(n * m.n_expert_used);
    weight_.resize(n * m.n_expert_used);
    start_.resize(m.n_expert + 1);
    rows_.resize(n * m.n_expert_used);
    row_weight_.resize(n * m.n_expert_used);
    x_.resize(n * hp_.n_embd);
    y_.resize(n * m.n_expert_used * hp_.n_embd);
    if (hp_.moe.n_ff_shexp > 0) shared_.resize(n * hp_.n_embd);
    gate_.resize(n * hp_.n_ff_max());
    up_.resize(n * hp_.n_ff_max());
}

GatedFfn expert_ffn(const LayerWeights& l, int e) {
    GatedFfn w{l.ffn_gate_exps.mat(e), l.ffn_up_exps.mat(e), l.ffn_down_exps.mat(e)};
    auto bias = [e](const WeightRef& b) { return b ? b.f32() + e * b.n_cols : nullptr; };
    w.gate_b = bias(l.ffn_gate_exps_b);
    w.up_b = bias(l.ffn_up_exps_b);
    w.down_b = bias(l.ffn_down_exps_b);
    return w;
}

void MoeFfn::choose(const LayerWeights& l, float* logit, int32_t* sel, float* weight) const {
    const models::MoeParams& m = hp_.moe;
    const int64_t N = m.n_expert, K = m.n_expert_used;
    if (l.ffn_gate_inp_b) cpu::add(logit, l.ffn_gate_inp_b.f32(), N);
    // The scores the weights come from; gpt-oss weighs its choice by a softmax over the chosen logits.
    float* score = logit;
    if (m.gating == models::ExpertGating::Softmax) cpu::softmax(score, N);
    else if (m.gating == models::ExpertGating::Sigmoid)
        for (int64_t e = 0; e < N; ++e) score[e] = 1.0f / (1.0f + std::exp(-score[e]));
    // The choice ranks by the score plus the selection bias (DeepSeek-V3's exp_probs_b). A NaN
    // (weights that overflowed) ranks last instead of breaking the sort's ordering.
    thread_local std::vector<float> rank;
    rank.assign(score, score + N);
    if (l.exp_probs_b) cpu::add(rank.data(), l.exp_probs_b.f32(), N);
    for (int64_t e = 0; e < N; ++e)
        if (std::isnan(rank[e])) rank[e] = -INFINITY;
    if (m.n_group > 1) keep_best_groups(rank.data());
    // The K best experts; ties go to the lower index.
    thread_local std::vector<int32_t> idx;
    idx.resize(N);
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + K, idx.end(),
                      [&](int32_t a, int32_t b) { return rank[a] > rank[b] || (rank[a] == rank[b] && a < b); });
    for (int64_t k = 0; k < K; ++k) weight[k] = score[sel[k] = idx[k]];
    if (m.gating == models::ExpertGating::SoftmaxChosen) {
        cpu::softmax(weight, K);
        return;
    }
    float sum = 0;
    for (int64_t k = 0; k < K; ++k) sum += weight[k];
    // As llama.cpp: the sum is kept from 0 (the smallest normal f16).
    const float norm = m.norm_weights ? 1.0f / std::max(sum, 6.103515625e-5f) : 1.0f;
    for (int64_t k = 0; k < K; ++k) weight[k] *= norm * m.weights_scale;
}

void MoeFfn::keep_best_groups(float* rank) const {
    const models::MoeParams& m = hp_.moe;
    const int64_t per = m.n_expert / m.n_group;
    // Each group's two best scores summed; the n_group_used best groups kept (ties: the lower index).
    thread_local std::vector<float> group_score;
    thread_local std::vector<int32_t> order;
    group_score.resize(size_t(m.n_group));
    for (int32_t g = 0; g < m.n_group; ++g) {
        float best = -INFINITY, second = -INFINITY;
        for (int64_t e = g * per; e < (g + 1) * per; ++e) {
            if (rank[e] > best) second = best, best = rank[e];
            else if (rank[e] > second) second = rank[e];
        }
        group_score[size_t(g)] = best + second;
    }
    order.resize(size_t(m.n_group));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return group_score[a] > group_score[b]; });
    for (int32_t i = m.n_group_used; i < m.n_group; ++i)
        std::fill_n(rank + order[size_t(i)] * per, per, -INFINITY);
}

void MoeFfn::route(const LayerWeights& l, const PassMatmul& mm, const PassLayout& p, const float* xn) {
    const models::MoeParams& m = hp_.moe;
    const int64_t n = p.n(), N = m.n_expert, K = m.n_expert_used;
    mm.project(l.ffn_gate_inp, xn, n, logits_.data(), p.n_long);
    cpu::parallel_for(n, [&](int64_t t) { choose(l, &logits_[t * N], &chosen_[t * K], &weight_[t * K]); });
    // Group the rows by expert, each group in row order.
    std::fill(start_.begin(), start_.end(), 0);
    for (int64_t i = 0; i < n * K; ++i) ++start_[chosen_[i] + 1];
    std::partial_sum(start_.begin(), start_.end(), start_.begin());
    std::vector<int64_t> at(start_.begin(), start_.end() - 1);
    for (int64_t t = 0; t < n; ++t)
        for (int64_t k = 0; k < K; ++k) {
            const int64_t i = at[chosen_[t * K + k]]++;
            rows_[i] = t;
            row_weight_[i] = weight_[t * K + k];
        }
}

template <class Ffn>
void MoeFfn::for_group(int e, std::span<const cpu::MatmulOut> probe, const PassLayout& p, const float* xn, Ffn&& ffn) {
    const int64_t E = hp_.n_embd, r0 = start_[e], n = start_[e + 1] - r0;
    const int64_t* rows = &rows_[r0];
    cpu::parallel_for(n, [&](int64_t i) { std::memcpy(&x_[i * E], &xn[rows[i] * E], E * sizeof(float)); });
    const int64_t n_long = std::lower_bound(rows, rows + n, p.n_long) - rows;
    if (PassMatmul::batch_invariant(probe) || n_long == 0) {
        ffn(0, n, n_long);
        return;
    }
    // Float weights: each long segment's rows as that sequence alone would run them.
    int64_t i = 0;
    for (const PassLayout::Segment& s : p.segments) {
        if (s.first >= p.n_long) break;
        const int64_t j = std::lower_bound(rows + i, rows + n_long, s.first + s.n) - rows;
        if (j > i) ffn(i, j, j - i);
        i = j;
    }
    if (n > n_long) ffn(n_long, n, 0);
}

void MoeFfn::add_expert(int e, float* out) {
    const int64_t E = hp_.n_embd, r0 = start_[e], n = start_[e + 1] - r0;
    cpu::parallel_for(n, [&](int64_t i) {
        float* o = &out[rows_[r0 + i] * E];
        const float wt = row_weight_[r0 + i];
        const float* y = &y_[(r0 + i) * E];
        for (int64_t c = 0; c < E; ++c) o[c] += wt * y[c];
    });
}

void MoeFfn::run(int il, const LayerWeights& l, const PassMatmul& mm, const PassLayout& p, const float* xn, float* out,
                 RoutingStats& stats) {
    const int64_t n = p.n(), E = hp_.n_embd;
    route(l, mm, p, xn);
    // Offloaded experts: the reads of those not held start now, and the pass gives its slots
    // back however it ends.
    ExpertCache* cache = cache_ && cache_->holds(il) ? cache_ : nullptr;
    // A pass that fails still waits for the experts it sent to the device: their outputs land in y_.
    struct Release {
        ExpertCache* c;
        RemoteExperts* r;
        ~Release() {
            if (c) c->release();
            if (r) try {
                    r->collect();
                } catch (const std::exception&) {  // the pass's own error is the one reported
                }
        }
    } release{cache, remote_};
    used_.clear();
    waiting_.clear();
    for (int e = 0; e < hp_.moe.n_expert; ++e) {
        if (start_[e + 1] == start_[e]) continue;
        used_.push_back(e);
        stats.add(il, e, static_cast<uint64_t>(start_[e + 1] - start_[e]));
        if (!remote_ || !remote_->holds(il, e)) waiting_.push_back(e);  // computed here
    }
    if (cache) cache->fetch(il, waiting_, p.n_long == 0);
    // The device's experts first: they run there while the host computes the rest.
    for (int e : used_) {
        if (!remote_ || !remote_->holds(il, e)) continue;
        const cpu::MatmulOut probe[] = {matmul_out(l.ffn_gate_exps, nullptr), matmul_out(l.ffn_down_exps, nullptr)};
        float* y = &y_[start_[e] * E];
        for_group(e, probe, p, xn, [&](int64_t i0, int64_t i1, int64_t n_long) {
            remote_->start(il, e, &x_[i0 * E], i1 - i0, n_long, &y[i0 * E]);
        });
    }
    // The shared experts next, while those run and the cache's reads land; added last, as they always were.
    if (l.ffn_up_shexp)
        gated_ffn(mm, hp_, {l.ffn_gate_shexp, l.ffn_up_shexp, l.ffn_down_shexp}, xn, n, p.n_long, gate_.data(),
                  up_.data(), shared_.data());
    auto compute = [&](int e) {
        GatedFfn w = expert_ffn(l, e);
        if (cache) {
            const ExpertMats m = cache->get(il, e);
            w.gate = m.gate, w.up = m.up, w.down = m.down;
        }
        const cpu::MatmulOut probe[] = {matmul_out(w.gate, nullptr), matmul_out(w.down, nullptr)};
        float* y = &y_[start_[e] * E];
        for_group(e, probe, p, xn, [&](int64_t i0, int64_t i1, int64_t n_long) {
            const int64_t F = w.gate.n_rows;
            gated_ffn(mm, hp_, w, &x_[i0 * E], i1 - i0, n_long, &gate_[i0 * F], &up_[i0 * F], &y[i0 * E]);
        });
    };
    // The experts already held first, while the others' reads land; then those, as they do.
    std::vector<int32_t>& later = later_;
    later.clear();
    for (int e : waiting_) {
        if (!cache || cache->ready(il, e)) compute(e);
        else later.push_back(e);
    }
    for (int e : later) compute(e);
    if (remote_) remote_->collect();  // a second collect() in `release` finds nothing to wait for
    // Added in index order: a row's sum is taken in the same order in any pass.
    std::fill_n(out, n * E, 0.0f);
    for (int e : used_) add_expert(e, out);
    if (l.ffn_up_shexp) cpu::add(out, shared_.data(), n * E);
}

}  // namespace strata::runtime
