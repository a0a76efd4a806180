#pragma once
// The model architectures Strata runs (GGUF `general.architecture`) and what sets each apart:
// one table (arch.cpp) that the hyperparameters, the weight binding and the forward pass read,
// so adding an architecture starts with one row there.
#include <optional>
#include <string_view>

namespace strata::models {

enum class Arch { Llama, Mistral, Qwen2, Qwen3, Qwen3Moe, Gemma2, Gemma3, Phi3, DeepSeek2, GptOss };
enum class RopeMode { Normal, NeoX };  // adjacent pairs (GPT-J) or split halves (GPT-NeoX)
// The gate's activation: SwiGLU, GeGLU (tanh approximation), or gpt-oss's SwiGLU with the gate
// capped and the up projection clamped (Hparams::swiglu_alpha, swiglu_limit).
enum class FfnAct { Silu, GeluTanh, SiluClamped };
// The router's expert weights (expert_gating_func): a softmax or sigmoids over every expert's
// logit (the top ones chosen from those), or a softmax over the chosen experts' logits alone
// (gpt-oss).
enum class ExpertGating { Softmax, Sigmoid, SoftmaxChosen };

struct ArchTraits {
    std::string_view name;
    Arch arch;
    RopeMode rope_mode = RopeMode::Normal;
    bool qkv_bias = false;      // attn_{q,k,v}.bias (qwen2)
    bool qk_norm = false;       // attn_{q,k}_norm: RMSNorm of each head of q and k before RoPE
    bool post_norms = false;    // post_attention_norm, post_ffw_norm on each block's output (gemma)
    FfnAct ffn_act = FfnAct::Silu;
    bool embd_scaled = false;   // token embeddings times sqrt(n_embd) (gemma)
    int swa_period = 0;         // default sliding-window layer pattern: of every `period` layers
                                // all but the last use the window (0: no window by default)
    bool swa_local_rope = false;  // window layers rotate by their own base (10000 unless
                                  // rope.freq_base_swa), unscaled (gemma3); else as the others
    bool attn_softcap = false;  // attention scores soft-capped when the metadata gives a cap (gemma2)
    bool needs_experts = false; // a mixture-of-experts architecture (expert_count required)
    bool mla = false;           // multi-head latent attention, leading dense layers, shared experts (deepseek2)
    bool attn_sinks = false;    // attn_sinks: a logit per head in each softmax's denominator (gpt-oss)
    bool attn_out_bias = false; // attn_output.bias (gpt-oss)
    bool expert_biases = false; // the router's and each expert's biases (gpt-oss)
    ExpertGating gating = ExpertGating::Softmax;  // without expert_gating_func
    bool gating_from_file = true;                 // expert_gating_func read (gpt-oss's is fixed)
    bool expert_norm = true;    // the chosen experts' weights normalised without expert_weights_norm
};

// The row of `name`, or nullopt for an architecture Strata does not run.
std::optional<ArchTraits> find_arch(std::string_view name);
const ArchTraits& arch_traits(Arch a);
std::string_view arch_name(Arch a);
// Names of every supported architecture, for error messages.
std::string_view supported_arch_list();

}  // namespace strata::models
