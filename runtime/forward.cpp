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

namespace {
// cpu::matmul gives a token row the same bits whatever the other rows of the call for
// block-quantized weights (int8 activations, integer dot products: tests/unit/runtime/
// test_forward.cpp); with float activations its decode (<= 4 rows) and prefill strategies
// round differently, each giving the same bits for a row whatever the others of its kind.
constexpr int64_t kDecodeRows = 4;
bool batch_invariant(DType w) { return cpu::act_format_for(w) == cpu::ActFormat::Q8x2; }
}  // namespace

void Forward::matmul(std::span<const cpu::MatmulOut> outs, int64_t n_cols, const float* x, int64_t n, int64_t n_long) {
    bool invariant = true;
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
    const cpu::MatmulOut out{w.type, w.data, w.n_rows, y};
    matmul({&out, 1}, w.n_cols, x, n, n_long);
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

void Forward::layer(int il, KvCache& kv, std::span<const Segment> segments, int64_t n, int64_t n_long) {
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
    matmul(qkv, E, xn_.data(), n, n_long);
    cpu::parallel_for(n, [&](int64_t t) {
        if (l.bq) cpu::add(&q_[t * Q], l.bq.f32(), Q);
        if (l.bk) cpu::add(&k_[t * KV], l.bk.f32(), KV);
        if (l.bv) cpu::add(&v_[t * KV], l.bv.f32(), KV);
        cpu::rope(&q_[t * Q], hp_.n_head, pos_[t], rope);
        cpu::rope(&k_[t * KV], hp_.n_head_kv, pos_[t], rope);
        std::copy_n(&k_[t * KV], KV, kv.k(il, block_[t]) + row_[t] * KV);
        std::copy_n(&v_[t * KV], KV, kv.v(il, block_[t]) + row_[t] * KV);
    });
    attention(il, kv, segments);
    kv.end_layer(il, dirty_);

    project(l.wo, attn_.data(), n, out_.data(), n_long);
    cpu::add(x_.data(), out_.data(), n * E);

    norm_rows(l.ffn_norm, n);
    const cpu::MatmulOut gate_up[] = {{l.ffn_gate.type, l.ffn_gate.data, l.ffn_gate.n_rows, gate_.data()},
                                      {l.ffn_up.type, l.ffn_up.data, l.ffn_up.n_rows, up_.data()}};
    matmul(gate_up, E, xn_.data(), n, n_long);
    cpu::parallel_for(n, [&](int64_t t) { cpu::swiglu(&gate_[t * F], &up_[t * F], F); });
    project(l.ffn_down, gate_.data(), n, out_.data(), n_long);
    store_.release(il);
    cpu::add(x_.data(), out_.data(), n * E);
}

void Forward::attention(int il, KvCache& kv, std::span<const Segment> segments) {
    const int64_t Q = hp_.n_embd_q();
    auto run = [&](const Segment& s) {
        cpu::AttentionArgs a;
        a.q = &q_[s.first * Q];
        a.k = kv.k(il, 0);
        a.v = kv.v(il, 0);
        a.out = &attn_[s.first * Q];
        a.n_tokens = s.n;
        a.pos0 = s.pos0;
        a.n_head = hp_.n_head;
        a.n_head_kv = hp_.n_head_kv;
        a.head_dim = hp_.head_dim;
        a.kv_stride = kv.row_stride();
        a.block_table = kv.block_table(s.seq).data();
        a.block_size = KvCache::kBlockSize;
        a.block_stride = kv.block_stride();
        cpu::attention(a);
    };
    // Segments with many query rows spread over the threads themselves; the short ones (decode
    // steps) share one parallel loop, each inline in its task. Each row's result is the same
    // either way.
    constexpr int64_t kOwnLoop = 16;
    std::vector<const Segment*> small;
    for (const Segment& s : segments) {
        if (s.n >= kOwnLoop) run(s);
        else small.push_back(&s);
    }
    if (small.size() == 1) run(*small[0]);
    else if (!small.empty()) cpu::parallel_for(static_cast<int64_t>(small.size()), [&](int64_t i) { run(*small[i]); });
}

void Forward::check(std::span<const int32_t> tokens) const {
    if (tokens.empty()) throw UsageError("nothing to evaluate: the token list is empty");
    for (int32_t t : tokens)
        if (t < 0 || t >= hp_.n_vocab) throw UsageError(fmt::format("token id {} is outside the vocabulary (0..{})", t, hp_.n_vocab - 1));
}

void Forward::resize(int64_t ub) {
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

void Forward::pass(std::span<const int32_t> tokens, std::span<const Segment> segments, KvCache& kv) {
    const int64_t n = static_cast<int64_t>(tokens.size());
    pos_.resize(n);
    block_.resize(n);
    row_.resize(n);
    dirty_.clear();
    for (const Segment& s : segments) {
        const auto table = kv.block_table(s.seq);
        if (KvCache::blocks_for(s.pos0 + s.n) > static_cast<int64_t>(table.size()))
            throw UsageError(fmt::format("sequence {} has no KV blocks reserved for positions {}..{}", s.seq, s.pos0,
                                         s.pos0 + s.n - 1),
                             "reserve them first (KvCache::reserve)");
        for (int64_t i = 0; i < s.n; ++i) {
            const int64_t t = s.first + i, p = s.pos0 + i;
            pos_[t] = p;
            block_[t] = table[p / KvCache::kBlockSize];
            row_[t] = static_cast<int32_t>(p % KvCache::kBlockSize);
            if (dirty_.empty() || dirty_.back() != block_[t]) dirty_.push_back(block_[t]);
        }
    }
    int64_t n_long = 0;  // rows of the long segments, which come first
    for (const Segment& s : segments) {
        if (s.n <= kDecodeRows) break;
        n_long += s.n;
    }
    std::sort(dirty_.begin(), dirty_.end());
    dirty_.erase(std::unique(dirty_.begin(), dirty_.end()), dirty_.end());
    embed(tokens);
    for (int il = 0; il < hp_.n_layer; ++il) layer(il, kv, segments, n, n_long);
    for (const Segment& s : segments) kv.commit(s.seq, tokens.subspan(s.first, s.n));
}

void Forward::head(std::span<const int64_t> rows, float* logits, bool one_per_entry) {
    const int64_t E = hp_.n_embd;
    for (size_t i = 0; i < rows.size(); ++i)
        cpu::rms_norm(&x_[rows[i] * E], w_.output_norm.f32(), &xn_[i * E], E, hp_.rms_eps);
    const int64_t n = static_cast<int64_t>(rows.size());
    // One row per batch entry: each as its sequence alone would compute it (a single row).
    project(w_.output, xn_.data(), n, logits, one_per_entry ? 0 : n);
}

void Forward::eval(std::span<const int32_t> tokens, KvCache& kv, std::vector<float>& logits, bool all_logits) {
    check(tokens);
    if (!kv.reserve(0, static_cast<int32_t>(tokens.size())))
        throw OutOfBudget(fmt::format("KV cache full: {} of {} blocks in use, {} more needed", kv.pool().n_used(),
                                      kv.pool().n_blocks(), kv.blocks_needed(0, kv.n_past() + static_cast<int32_t>(tokens.size()))),
                          "free sequences, or give the cache more room (--ctx, --dram)");
    const int64_t V = hp_.n_vocab;
    const int64_t ub = std::min<int64_t>(kMaxUbatch, static_cast<int64_t>(tokens.size()));
    resize(ub);
    logits.resize((all_logits ? tokens.size() : 1) * V);
    std::vector<int64_t> rows;
    for (size_t start = 0; start < tokens.size(); start += ub) {
        const int64_t n = std::min<int64_t>(ub, static_cast<int64_t>(tokens.size() - start));
        const Segment seg{0, kv.n_past(), 0, n};
        pass(tokens.subspan(start, n), {&seg, 1}, kv);
        // Only the rows whose logits are wanted go through the output head.
        if (!all_logits && start + n < tokens.size()) continue;
        rows.clear();
        for (int64_t t = all_logits ? 0 : n - 1; t < n; ++t) rows.push_back(t);
        head(rows, all_logits ? &logits[start * V] : logits.data(), false);
    }
}

void Forward::eval_batch(std::span<const SeqTokens> batch, KvCache& kv, std::vector<float>& logits) {
    int64_t total = 0;
    std::vector<SeqId> seqs;
    for (const SeqTokens& e : batch) {
        check(e.tokens);
        total += static_cast<int64_t>(e.tokens.size());
        seqs.push_back(e.seq);
    }
    std::sort(seqs.begin(), seqs.end());
    if (std::adjacent_find(seqs.begin(), seqs.end()) != seqs.end())
        throw UsageError("a batch names the same sequence twice", "give each sequence's tokens as one entry");
    const int64_t V = hp_.n_vocab;
    logits.resize(batch.size() * V);
    resize(std::min(kMaxUbatch, total));
    // Passes of up to kMaxUbatch tokens; an entry may be split across passes. Entries of more
    // than kDecodeRows tokens first (Forward::matmul).
    std::vector<size_t> order(batch.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_partition(order.begin(), order.end(), [&](size_t i) { return int64_t(batch[i].tokens.size()) > kDecodeRows; });
    std::vector<int32_t> tokens;
    std::vector<Segment> segments;
    std::vector<int64_t> rows, owners;  // rows of entries whose last token is in the pass
    size_t entry = 0, done = 0;  // the next token: batch[order[entry]].tokens[done]
    while (entry < batch.size()) {
        tokens.clear();
        segments.clear();
        rows.clear();
        owners.clear();
        while (entry < batch.size() && static_cast<int64_t>(tokens.size()) < kMaxUbatch) {
            const SeqTokens& e = batch[order[entry]];
            const size_t take = std::min(e.tokens.size() - done, size_t(kMaxUbatch) - tokens.size());
            // Earlier passes committed this entry's first `done` tokens already.
            segments.push_back({e.seq, kv.seq_len(e.seq), static_cast<int64_t>(tokens.size()), static_cast<int64_t>(take)});
            tokens.insert(tokens.end(), e.tokens.begin() + done, e.tokens.begin() + done + take);
            done += take;
            if (done == e.tokens.size()) {
                rows.push_back(static_cast<int64_t>(tokens.size()) - 1);
                owners.push_back(static_cast<int64_t>(order[entry]));
                ++entry;
                done = 0;
            }
        }
        pass(tokens, segments, kv);
        if (rows.empty()) continue;
        std::vector<float> out(rows.size() * V);
        head(rows, out.data(), true);
        for (size_t i = 0; i < rows.size(); ++i) std::copy_n(&out[i * V], V, &logits[owners[i] * V]);
    }
}

}  // namespace strata
