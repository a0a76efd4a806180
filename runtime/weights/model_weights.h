#pragma once
// Views of a model's weight tensors in the mapped GGUF data section, checked against the
// hyperparameters (names, shapes, supported types) before any compute. Fused tensors (phi3's
// attn_qkv and gate+up ffn_up) are bound as views of their rows, so the forward pass sees the
// same q, k, v, gate and up matrices for every architecture.
#include <cstdint>
#include <iterator>
#include <vector>

#include "core/dtype.h"
#include "cpu/matmul.h"
#include "models/hparams.h"

namespace strata::models { class GgufFile; struct TensorInfo; }

namespace strata::runtime {

// A 2-D weight [n_rows x n_cols] (n_cols contiguous), a 1-D vector (n_rows == 1), or n_mats
// such matrices one after another (the experts of a 3-D tensor).
struct WeightRef {
    const models::TensorInfo* info = nullptr;
    const void* data = nullptr;
    DType type = DType::F32;
    int64_t n_cols = 0;
    int64_t n_rows = 0;
    int64_t n_mats = 1;
    uint64_t offset = 0;  // where this view starts in its tensor's bytes (rows of a fused tensor)
    bool tiled = false;   // rewritten in place by cpu::tile_weights (WeightStore::tile_for_cpu), per matrix

    explicit operator bool() const { return data != nullptr; }
    const float* f32() const { return static_cast<const float*>(data); }
    uint64_t mat_bytes() const { return row_bytes(type, n_cols) * static_cast<uint64_t>(n_rows); }
    uint64_t bytes() const { return mat_bytes() * static_cast<uint64_t>(n_mats); }
    // Matrix `e` of n_mats (an expert's).
    WeightRef mat(int64_t e) const;
    // Rows [r0, r0 + n) of a one-matrix weight in the file's layout (before tiling).
    WeightRef rows(int64_t r0, int64_t n) const;
};

// y = x W^T for cpu::matmul / cpu::matmul_many.
inline cpu::MatmulOut matmul_out(const WeightRef& w, float* y) { return {w.type, w.data, w.n_rows, y, w.tiled}; }

// Row `row` of a 2-D weight as n_cols floats (token embeddings), in its file layout or tiled.
void dequantize_weight_row(const WeightRef& w, int64_t row, float* dst);

// Where the view's first byte is in the model file.
uint64_t file_offset(const models::GgufFile& f, const WeightRef& w);

struct LayerWeights {
    WeightRef attn_norm, wq, wk, wv, wo;
    WeightRef bq, bk, bv;                    // qwen2, gpt-oss, and any file that has them
    WeightRef bo;                            // attn_output's bias: gpt-oss, and any file that has it
    WeightRef q_norm, k_norm;                // qwen3, gemma3: RMSNorm weights of one head
    WeightRef attn_post_norm, ffn_post_norm; // gemma
    WeightRef attn_sinks;                    // gpt-oss: one logit per head in each softmax's denominator
    // Multi-head latent attention (deepseek2): the low-rank query (attn_q_a and its norm; wq is
    // then attn_q_b), the latent and shared RoPE part (attn_kv_a_mqa) and the latent's norm, and
    // per head (n_mats = n_head) the latent's key and value expansions attn_k_b, attn_v_b.
    WeightRef wq_a, q_a_norm, wkv_a, kv_a_norm, wk_b, wv_b;
    WeightRef ffn_norm, ffn_gate, ffn_up, ffn_down;  // the dense feed-forward
    // Mixture of experts: the router, every expert's matrices (n_mats = n_expert) and the shared experts.
    WeightRef ffn_gate_inp, ffn_gate_exps, ffn_up_exps, ffn_down_exps;
    WeightRef ffn_gate_shexp, ffn_up_shexp, ffn_down_shexp;
    // The router's bias on its logits (gpt-oss), its bias for the choice alone (DeepSeek-V3's
    // exp_probs_b), and each expert's biases (gpt-oss: one row per expert).
    WeightRef ffn_gate_inp_b, exp_probs_b, ffn_gate_exps_b, ffn_up_exps_b, ffn_down_exps_b;

    using Member = WeightRef LayerWeights::*;
    // Every view, present or not, for the loops that treat them alike.
    static constexpr Member kAll[] = {
        &LayerWeights::attn_norm,      &LayerWeights::wq,             &LayerWeights::wk,
        &LayerWeights::wv,             &LayerWeights::wo,             &LayerWeights::bq,
        &LayerWeights::bk,             &LayerWeights::bv,             &LayerWeights::bo,
        &LayerWeights::q_norm,         &LayerWeights::k_norm,         &LayerWeights::attn_post_norm,
        &LayerWeights::ffn_post_norm,  &LayerWeights::attn_sinks,     &LayerWeights::wq_a,
        &LayerWeights::q_a_norm,       &LayerWeights::wkv_a,          &LayerWeights::kv_a_norm,
        &LayerWeights::wk_b,           &LayerWeights::wv_b,           &LayerWeights::ffn_norm,
        &LayerWeights::ffn_gate,       &LayerWeights::ffn_up,         &LayerWeights::ffn_down,
        &LayerWeights::ffn_gate_inp,   &LayerWeights::ffn_gate_exps,  &LayerWeights::ffn_up_exps,
        &LayerWeights::ffn_down_exps,  &LayerWeights::ffn_gate_shexp, &LayerWeights::ffn_up_shexp,
        &LayerWeights::ffn_down_shexp, &LayerWeights::ffn_gate_inp_b, &LayerWeights::exp_probs_b,
        &LayerWeights::ffn_gate_exps_b, &LayerWeights::ffn_up_exps_b, &LayerWeights::ffn_down_exps_b};
    static constexpr size_t kCount = std::size(kAll);
    // m's place in kAll, for tables of the views kept elsewhere (a device's copies).
    static constexpr size_t index_of(Member m) {
        for (size_t i = 0; i < kCount; ++i)
            if (kAll[i] == m) return i;
        return kCount;
    }
    // The matrices matmuls read (tiled at load for the CPU, typed for the GPU's kernels).
    static constexpr Member kMatrices[] = {
        &LayerWeights::wq,            &LayerWeights::wk,            &LayerWeights::wv,
        &LayerWeights::wo,            &LayerWeights::wq_a,          &LayerWeights::wkv_a,
        &LayerWeights::wk_b,          &LayerWeights::wv_b,          &LayerWeights::ffn_gate,
        &LayerWeights::ffn_up,        &LayerWeights::ffn_down,      &LayerWeights::ffn_gate_inp,
        &LayerWeights::ffn_gate_exps, &LayerWeights::ffn_up_exps,   &LayerWeights::ffn_down_exps,
        &LayerWeights::ffn_gate_shexp, &LayerWeights::ffn_up_shexp, &LayerWeights::ffn_down_shexp};
};

struct ModelWeights {
    WeightRef tok_embd;      // [n_vocab x n_embd]
    WeightRef output_norm;
    WeightRef output;        // tok_embd when the model ties them
    WeightRef rope_freqs;    // optional llama3 frequency factors
    WeightRef rope_long, rope_short;  // optional phi3 LongRoPE factors (long and short contexts)
    std::vector<LayerWeights> layers;
    int32_t n_expert = 0, n_expert_used = 0;  // of a mixture of experts (decode_bytes)

    // The views outside the layers.
    std::vector<WeightRef*> fixed();
    std::vector<const WeightRef*> fixed() const;

    // Throws FormatError naming the missing or mis-shaped tensor.
    static ModelWeights bind(const models::GgufFile& f, const models::Hparams& hp);
    uint64_t total_bytes() const;
    // Bytes one single-token pass reads: every layer and the output head, of the experts only
    // the share a token uses (expert_used_count of expert_count); of an untied embedding table
    // only one row (left out).
    uint64_t decode_bytes() const;
};

}  // namespace strata::runtime
