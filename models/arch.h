#pragma once
// The model architectures Strata runs (GGUF `general.architecture`) and what sets each apart:
// one table (arch.cpp) that the hyperparameters, the weight binding and the forward pass read,
// so adding an architecture starts with one row there.
#include <optional>
#include <string_view>

namespace strata::models {

enum class Arch { Llama, Mistral, Qwen2, Qwen3, Qwen3Moe, Gemma2, Gemma3, Phi3 };
enum class RopeMode { Normal, NeoX };  // adjacent pairs (GPT-J) or split halves (GPT-NeoX)
enum class FfnAct { Silu, GeluTanh };  // the gate's activation: SwiGLU or GeGLU (tanh approximation)

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
    bool attn_softcap = false;  // attention scores soft-capped when the metadata gives a cap (gemma2)
    bool needs_experts = false; // a mixture-of-experts architecture (expert_count required)
};

// The row of `name`, or nullopt for an architecture Strata does not run.
std::optional<ArchTraits> find_arch(std::string_view name);
const ArchTraits& arch_traits(Arch a);
std::string_view arch_name(Arch a);
// Names of every supported architecture, for error messages.
std::string_view supported_arch_list();

}  // namespace strata::models
