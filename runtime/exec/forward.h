#pragma once
// The forward pass on the CPU over the paged KV cache, for every architecture models/arch.h
// names: one pass takes tokens of several sequences (each at its own positions, with its own
// block table). The matmuls run over all of them at once, so the weights are read once per
// pass for the whole batch; attention runs per sequence. A layer is an attention block (the
// architecture's query/key preparation in qk_prep, its window and score scale in
// attention_pass) and a feed-forward block (ffn_dense, or ffn_moe for experts), each with
// gemma's post-norm where the model has one. A token's logits do not depend on the other
// tokens of its pass (PassMatmul; attention runs per row; experts add in a fixed order).
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "models/hparams.h"
#include "runtime/exec/backend.h"
#include "runtime/exec/ffn_moe.h"
#include "runtime/exec/kv_rebuild.h"
#include "runtime/exec/pass_matmul.h"
#include "runtime/exec/routing_stats.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/weights/model_weights.h"

namespace strata::runtime {

class WeightStore;

class Forward : public Backend {
public:
    Forward(const models::Hparams& hp, WeightStore& weights);
    std::string_view name() const override { return "cpu"; }
    const RoutingStats* routing_stats() const override { return stats_.get(); }

    // Opt-in (EngineOptions::int8_activations): single-level int8 activations, cpu::matmul's `int8`.
    void set_int8_activations(bool on) { mm_.set_int8_activations(on); }
    // Bytes of activations a pass of up to kMaxUbatch tokens holds (logits not included).
    static uint64_t activation_bytes(const models::Hparams& hp);

    // For a device backend that runs some of its layers here (the plan's CPU layers): the
    // pass's hidden states are in hidden(), n_embd floats per token, before and after run_layer.
    void prepare(int64_t n_tokens) { reserve(n_tokens); }
    void begin_pass(const PassLayout& p, KvCache& kv);
    void run_layer(int il, KvCache& kv, const PassLayout& p) { layer(il, kv, p); }
    // Layer il's feed-forward block alone, added to hidden() (the device ran its attention).
    void run_feed_forward(int il, const PassLayout& p);
    float* hidden() { return x_.data(); }
    // A mixture of experts: the experts held on a device are computed there (null: none are).
    void set_remote_experts(RemoteExperts* remote) {
        if (moe_) moe_->set_remote_experts(remote);
    }

private:
    void reserve(int64_t n_tokens) override;
    void compute(const PassLayout& pass, KvCache& kv) override;
    void head(std::span<const int64_t> rows, float* logits, bool one_per_entry) override;
    void hidden(std::span<const int64_t> rows, float* out) override;
    void embed(std::span<const int32_t> tokens);
    // x += attention block, x += feed-forward block, with layer il's weights held meanwhile.
    void layer(int il, KvCache& kv, const PassLayout& p);
    void attention(int il, const LayerWeights& l, KvCache& kv, const PassLayout& p);
    void feed_forward(int il, const LayerWeights& l, const PassLayout& p);
    // dst = rms_norm(src) * w for n token rows of n_embd, in parallel for a batch.
    void norm_rows(const WeightRef& w, const float* src, float* dst, int64_t n);

    WeightStore& store_;
    const ModelWeights& w_;  // output head, embeddings and norms (always resident)
    PassMatmul mm_;
    KvRebuilder rebuilder_;                // layers whose KV cache keeps hidden states
    std::vector<RebuildRow> rebuild_rows_;  // the positions they rebuild in this pass
    std::unique_ptr<MoeFfn> moe_;           // mixture-of-experts models
    std::unique_ptr<RoutingStats> stats_;
    // Activations for one ubatch, token-major.
    std::vector<float> x_, xn_, q_, k_, v_, attn_, gate_, up_, out_;
};

}  // namespace strata::runtime
