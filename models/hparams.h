#pragma once
#include <cmath>
// Architecture and hyperparameters of a model, read from GGUF metadata.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "models/arch.h"

namespace strata::models {

class GgufFile;

// Mixture-of-experts feed-forward: a router picks n_expert_used of n_expert experts per token.
struct MoeParams {
    int32_t n_expert = 0;
    int32_t n_expert_used = 0;
    int32_t n_ff_exp = 0;     // each expert's hidden size
    int32_t n_ff_shexp = 0;   // the shared experts' hidden size (ffn_*_shexp), 0: none
    ExpertGating gating = ExpertGating::Softmax;
    bool norm_weights = true;  // the chosen experts' weights divided by their sum
    float weights_scale = 1.0f;
    // Grouped routing (DeepSeek-V3): experts in n_group equal groups; a token picks from the
    // n_group_used groups whose two best scores sum highest. 0: no groups.
    int32_t n_group = 0;
    int32_t n_group_used = 0;
    // The first n_dense_lead layers have a dense feed-forward of n_ff instead (deepseek2).
    int32_t n_dense_lead = 0;

    bool enabled() const { return n_expert > 0; }
    bool in_layer(int il) const { return enabled() && il >= n_dense_lead; }
};

// Multi-head latent attention (deepseek2). Each head's query is qk_nope values without RoPE then
// qk_rope with (from q_lora_rank through attn_q_a/attn_q_b, or straight from the hidden state
// with attn_q when q_lora_rank is 0); keys and values come from one shared latent of kv_lora_rank
// values per token (attn_kv_a_mqa, which also gives the shared RoPE part of every key), expanded
// per head: k_nope through attn_k_b (qk_nope values), v through attn_v_b (v_head_dim values).
// The cache keeps the latent and the RoPE part: kv_lora_rank + qk_rope values per token and
// layer. Files from older conversions hold attn_kv_b (k_b and v_b's rows interleaved per head)
// instead of the two split tensors (`split_kv_b` false).
struct MlaParams {
    int32_t q_lora_rank = 0;
    int32_t kv_lora_rank = 0;
    int32_t qk_nope = 0;
    int32_t qk_rope = 0;
    int32_t v_head_dim = 0;
    bool split_kv_b = true;

    bool enabled() const { return kv_lora_rank > 0; }
    int32_t k_head_dim() const { return qk_nope + qk_rope; }
    int32_t cache_width() const { return kv_lora_rank + qk_rope; }
};

// YaRN's magnitude for positions `factor` times the trained ones (0.1 m ln(factor) + 1; 1 at or below 1).
inline double yarn_mscale(double factor, double m = 1.0) { return factor <= 1.0 ? 1.0 : 0.1 * m * std::log(factor) + 1.0; }

struct Hparams {
    Arch arch = Arch::Llama;
    int32_t n_vocab = 0;
    int32_t n_ctx_train = 0;
    int32_t n_embd = 0;
    int32_t n_layer = 0;
    int32_t n_head = 0;
    int32_t n_head_kv = 0;       // MLA: 1, the shared latent
    int32_t head_dim = 0;        // of a query and key head (MLA: qk_nope + qk_rope)
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
    // YaRN (rope.scaling.type yarn): frequencies blended between the original and the
    // interpolated ones (the layer's freq_scale) over a ramp set by the betas and n_ctx_orig
    // (cpu::yarn_ramp); yarn_ext_factor 0: none. The rotation's magnitude, 0.1 ln(1 / freq_scale)
    // + 1, is each layer's own where yarn_layer_magnitude (as ggml computes it per rope: Gemma 3's
    // local layers, of scale 1, get none); deepseek2's is in rope_attn_factor or its attention scale.
    float yarn_ext_factor = 0.0f;
    bool yarn_layer_magnitude = false;
    float yarn_beta_fast = 32.0f;
    float yarn_beta_slow = 1.0f;
    bool attn_sinks = false;     // attn_sinks per layer (gpt-oss)
    bool attn_out_bias = false;  // attn_output.bias per layer (gpt-oss)
    // gpt-oss's clamped SwiGLU (FfnAct::SiluClamped): min(g, limit) * sigmoid(alpha * min(g, limit))
    // * (clamp(u, -limit, limit) + 1); llama.cpp's constants, which its files do not record.
    float swiglu_alpha = 1.702f;
    float swiglu_limit = 7.0f;
    MoeParams moe;
    MlaParams mla;

    // Values of one token's K row in the cache: n_head_kv * head_dim, or MLA's latent + RoPE part
    // (its V is the latent inside the same row).
    int32_t n_embd_kv() const { return mla.enabled() ? mla.cache_width() : n_head_kv * head_dim; }
    int32_t n_embd_q() const { return n_head * head_dim; }
    bool is_swa(int il) const { return n_swa > 0 && swa_layers[static_cast<size_t>(il)]; }
    // The widest feed-forward hidden layer a token goes through (dense, expert or shared).
    int32_t n_ff_max() const;

    // Throws FormatError for an unsupported architecture or inconsistent values.
    static Hparams from_gguf(const GgufFile& f);
};

}  // namespace strata::models
