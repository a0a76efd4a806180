#pragma once
// The llama-family forward pass on the CPU (llama, mistral, qwen2) over the paged KV cache:
// one pass takes tokens of several sequences (each at its own positions, with its own block
// table). The matmuls run over all of them at once, so the weights are read once per pass for
// the whole batch; attention runs per sequence.
#include <cstdint>
#include <span>
#include <vector>

#include "cpu/matmul.h"
#include "models/hparams.h"
#include "runtime/kv_cache.h"
#include "runtime/model_weights.h"

namespace strata {

class WeightStore;

// One sequence's share of a pass: `tokens` appended after its last position.
struct SeqTokens {
    SeqId seq = 0;
    std::span<const int32_t> tokens;
};

class Forward {
public:
    Forward(const Hparams& hp, WeightStore& weights);

    // Runs `tokens` at positions kv.n_past()... of sequence 0 and appends their keys and
    // values. Writes n_vocab logits of the last token, or of every token when `all_logits`
    // (row-major). The caller runs it inside the thread pool's arena.
    void eval(std::span<const int32_t> tokens, KvCache& kv, std::vector<float>& logits, bool all_logits);
    // Runs every entry's tokens (entries name distinct sequences) in passes of up to
    // kMaxUbatch tokens and writes n_vocab logits of each entry's last token, one row per
    // entry. The blocks must be reserved (KvCache::reserve): throws UsageError otherwise.
    // A token's logits do not depend on the other tokens of its pass: for block-quantized
    // weights cpu::matmul gives a token row the same bits in any batch, float weights get the
    // kernel strategy a sequence alone would use (Forward::matmul), attention runs per row.
    void eval_batch(std::span<const SeqTokens> batch, KvCache& kv, std::vector<float>& logits);

    static constexpr int64_t kMaxUbatch = 256;  // tokens per pass: bounds activation memory
    // Opt-in (EngineOptions::int8_activations): single-level int8 activations, cpu::matmul's `int8`.
    void set_int8_activations(bool on) { int8_acts_ = on; }
    // Bytes of activations a pass of up to kMaxUbatch tokens holds (logits not included).
    static uint64_t activation_bytes(const Hparams& hp);

private:
    // A run of one sequence's tokens inside a pass.
    struct Segment {
        SeqId seq;
        int64_t pos0;   // position of its first token
        int64_t first;  // its first token's row in the pass
        int64_t n;
    };
    void check(std::span<const int32_t> tokens) const;
    void resize(int64_t n_tokens);
    // One pass over `tokens` (at most kMaxUbatch) made of `segments`; commits them to kv.
    void pass(std::span<const int32_t> tokens, std::span<const Segment> segments, KvCache& kv);
    // logits rows = output head of the hidden states of `rows` (rows of the pass).
    void head(std::span<const int64_t> rows, float* logits, bool one_per_entry);
    void embed(std::span<const int32_t> tokens);
    void layer(int il, KvCache& kv, std::span<const Segment> segments, int64_t n, int64_t n_long);
    void attention(int il, KvCache& kv, std::span<const Segment> segments);
    // y = x W^T over n rows of the pass, of which the first n_long belong to segments of
    // more than 4 tokens: each row gets the bits a pass of its sequence alone would give it.
    void matmul(std::span<const cpu::MatmulOut> outs, int64_t n_cols, const float* x, int64_t n, int64_t n_long);
    void project(const WeightRef& w, const float* x, int64_t n, float* y, int64_t n_long);
    void norm_rows(const WeightRef& w, int64_t n);

    const Hparams& hp_;
    WeightStore& store_;
    const ModelWeights& w_;  // output head, embeddings and norms (always resident)
    bool int8_acts_ = false;
    // Activations for one ubatch, token-major.
    std::vector<float> x_, xn_, q_, k_, v_, attn_, gate_, up_, out_;
    // Per token of the pass: its position, and the block and row its KV goes to.
    std::vector<int64_t> pos_;
    std::vector<int32_t> block_, row_;
    std::vector<int32_t> dirty_;  // blocks the pass writes, ascending
};

}  // namespace strata
