#pragma once
// Architecture and hyperparameters of a model, read from GGUF metadata.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "models/arch.h"

namespace strata::models {

class GgufFile;

enum class ExpertGating { Softmax, Sigmoid };  // the router's probabilities (expert_gating_func)

// Mixture-of-experts feed-forward: a router picks n_expert_used of n_expert experts per token.
struct MoeParams {
    int32_t n_expert = 0;
    int32_t n_expert_used = 0;
    int32_t n_ff_exp = 0;     // each expert's hidden size
    int32_t n_ff_shexp = 0;   // the shared experts' hidden size (ffn_*_shexp), 0: none
    ExpertGating gating = ExpertGating::Softmax;
    bool norm_weights = true;  // the chosen experts' weights divided by their sum
    float weights_scale = 1.0f;

    bool enabled() const { return n_expert > 0; }
};

struct Hparams {
    Arch arch = Arch::Llama;
    int32_t n_vocab = 0;
    int32_t n_ctx_train = 0;
    int32_t n_embd = 0;
    int32_t n_layer = 0;
    int32_t n_head = 0;
    int32_t n_head_kv = 0;
    int32_t head_dim = 0;
    int32_t n_ff = 0;
    int32_t n_rot = 0;           // rotated dimensions per head
    float rope_freq_base = 10000.0f;
    float rope_freq_scale = 1.0f;  // 1 / linear scaling factor
    float rms_eps = 1e-5f;
    RopeMode rope_mode = RopeMode::Normal;
    bool qkv_bias = false;
    bool qk_norm = false;
    bool post_norms = false;
    FfnAct ffn_act = FfnAct::Silu;

    float embd_scale = 1.0f;     // token embeddings are multiplied by this
    float attn_scale = 0.0f;     // attention score scale; 0: 1/sqrt(head_dim)
    float attn_softcap = 0.0f;   // scores s -> c tanh(s / c) when c > 0
    float final_softcap = 0.0f;  // logits likewise
    // Sliding-window attention: layer il with swa_layers[il] sees the last n_swa positions
    // (itself included), with its own RoPE base and scale; the other layers see every position.
    int32_t n_swa = 0;
    std::vector<bool> swa_layers;
    float rope_freq_base_swa = 10000.0f;
    float rope_freq_scale_swa = 1.0f;
    // LongRoPE (phi3): rope_factors_long past n_ctx_orig positions of context, else
    // rope_factors_short; rotated values scaled by rope_attn_factor.
    int32_t n_ctx_orig = 0;
    float rope_attn_factor = 1.0f;
    MoeParams moe;

    int32_t n_embd_kv() const { return n_head_kv * head_dim; }
    int32_t n_embd_q() const { return n_head * head_dim; }
    bool is_swa(int il) const { return n_swa > 0 && swa_layers[static_cast<size_t>(il)]; }
    // The widest feed-forward hidden layer a token goes through (dense, expert or shared).
    int32_t n_ff_max() const;

    // Throws FormatError for an unsupported architecture or inconsistent values.
    static Hparams from_gguf(const GgufFile& f);
};

}  // namespace strata::models
