#pragma once
// The llama-family forward pass on the CPU (llama, mistral, qwen2): prompt tokens are
// processed as a batch, then one token at a time, each appending to the KV cache.
#include <cstdint>
#include <span>
#include <vector>

#include "models/hparams.h"
#include "runtime/model_weights.h"

namespace strata {

class KvCache;
class WeightStore;

class Forward {
public:
    Forward(const Hparams& hp, WeightStore& weights);

    // Runs `tokens` at positions kv.n_past()... and appends their keys and values. Writes
    // n_vocab logits of the last token, or of every token when `all_logits` (row-major).
    // The caller runs it inside the thread pool's arena.
    void eval(std::span<const int32_t> tokens, KvCache& kv, std::vector<float>& logits, bool all_logits);

    static constexpr int64_t kMaxUbatch = 256;  // tokens per pass: bounds activation memory
    // Opt-in (EngineOptions::int8_activations): single-level int8 activations, cpu::matmul's `int8`.
    void set_int8_activations(bool on) { int8_acts_ = on; }
    // Bytes of activations a pass of up to kMaxUbatch tokens holds (logits not included).
    static uint64_t activation_bytes(const Hparams& hp);

private:
    void embed(std::span<const int32_t> tokens);
    void layer(int il, KvCache& kv, int64_t pos0, int64_t n);
    void project(const WeightRef& w, const float* x, int64_t n, float* y);
    void norm_rows(const WeightRef& w, int64_t n);

    const Hparams& hp_;
    WeightStore& store_;
    const ModelWeights& w_;  // output head, embeddings and norms (always resident)
    bool int8_acts_ = false;
    // Activations for one ubatch, token-major.
    std::vector<float> x_, xn_, q_, k_, v_, attn_, gate_, up_, out_;
};

}  // namespace strata
