#pragma once
// The llama-family forward pass on the CPU (llama, mistral, qwen2) over the paged KV cache:
// one pass takes tokens of several sequences (each at its own positions, with its own block
// table). The matmuls run over all of them at once, so the weights are read once per pass for
// the whole batch; attention runs per sequence. A token's logits do not depend on the other
// tokens of its pass: for block-quantized weights cpu::matmul gives a token row the same bits
// in any batch, float weights get the kernel strategy a sequence alone would use
// (Forward::matmul), attention runs per row.
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "cpu/matmul.h"
#include "models/hparams.h"
#include "runtime/exec/backend.h"
#include "runtime/exec/kv_rebuild.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/weights/model_weights.h"

namespace strata::runtime {

class WeightStore;

class Forward : public Backend {
public:
    Forward(const models::Hparams& hp, WeightStore& weights);
    std::string_view name() const override { return "cpu"; }

    // Opt-in (EngineOptions::int8_activations): single-level int8 activations, cpu::matmul's `int8`.
    void set_int8_activations(bool on) { int8_acts_ = on; }
    // Bytes of activations a pass of up to kMaxUbatch tokens holds (logits not included).
    static uint64_t activation_bytes(const models::Hparams& hp);

    // For a device backend that runs some of its layers here (the plan's CPU layers): the
    // pass's hidden states are in hidden(), n_embd floats per token, before and after run_layer.
    void prepare(int64_t n_tokens) { reserve(n_tokens); }
    void begin_pass(const PassLayout& p, KvCache& kv);
    void run_layer(int il, KvCache& kv, const PassLayout& p) { layer(il, kv, p); }
    float* hidden() { return x_.data(); }

private:
    void reserve(int64_t n_tokens) override;
    void compute(const PassLayout& pass, KvCache& kv) override;
    void head(std::span<const int64_t> rows, float* logits, bool one_per_entry) override;
    void hidden(std::span<const int64_t> rows, float* out) override;
    void embed(std::span<const int32_t> tokens);
    void layer(int il, KvCache& kv, const PassLayout& p);
    // y = x W^T over n rows of the pass, of which the first n_long belong to segments of
    // more than 4 tokens: each row gets the bits a pass of its sequence alone would give it.
    void matmul(std::span<const cpu::MatmulOut> outs, int64_t n_cols, const float* x, int64_t n, int64_t n_long);
    void project(const WeightRef& w, const float* x, int64_t n, float* y, int64_t n_long);
    void norm_rows(const WeightRef& w, int64_t n);

    WeightStore& store_;
    const ModelWeights& w_;  // output head, embeddings and norms (always resident)
    bool int8_acts_ = false;
    KvRebuilder rebuilder_;                // layers whose KV cache keeps hidden states
    std::vector<RebuildRow> rebuild_rows_;  // the positions they rebuild in this pass
    // Activations for one ubatch, token-major.
    std::vector<float> x_, xn_, q_, k_, v_, attn_, gate_, up_, out_;
};

}  // namespace strata::runtime
