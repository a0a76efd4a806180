#include "models/arch.h"

#include <array>

namespace strata::models {

namespace {
// What llama.cpp's graph for each architecture does (src/models/<arch>.cpp), as data.
constexpr std::array<ArchTraits, 10> kArchs = {{
    {.name = "llama", .arch = Arch::Llama},
    {.name = "mistral", .arch = Arch::Mistral},
    {.name = "qwen2", .arch = Arch::Qwen2, .rope_mode = RopeMode::NeoX, .qkv_bias = true},
    {.name = "qwen3", .arch = Arch::Qwen3, .rope_mode = RopeMode::NeoX, .qk_norm = true},
    {.name = "qwen3moe", .arch = Arch::Qwen3Moe, .rope_mode = RopeMode::NeoX, .qk_norm = true, .needs_experts = true},
    {.name = "gemma2", .arch = Arch::Gemma2, .rope_mode = RopeMode::NeoX, .post_norms = true,
     .ffn_act = FfnAct::GeluTanh, .embd_scaled = true, .swa_period = 2, .attn_softcap = true},
    {.name = "gemma3", .arch = Arch::Gemma3, .rope_mode = RopeMode::NeoX, .qk_norm = true, .post_norms = true,
     .ffn_act = FfnAct::GeluTanh, .embd_scaled = true, .swa_period = 6, .swa_local_rope = true},
    {.name = "phi3", .arch = Arch::Phi3, .rope_mode = RopeMode::NeoX},
    // src/models/deepseek2.cpp: MLA, experts after leading dense layers, routing from the file.
    {.name = "deepseek2", .arch = Arch::DeepSeek2, .needs_experts = true, .mla = true, .expert_norm = false},
    // src/models/openai-moe.cpp: every other layer slides, sinks, biases, a softmax over the chosen experts.
    {.name = "gpt-oss", .arch = Arch::GptOss, .rope_mode = RopeMode::NeoX, .qkv_bias = true, .ffn_act = FfnAct::SiluClamped,
     .swa_period = 2, .needs_experts = true, .attn_sinks = true, .attn_out_bias = true, .expert_biases = true,
     .gating = ExpertGating::SoftmaxChosen, .gating_from_file = false, .expert_norm = false},
}};
}  // namespace

std::optional<ArchTraits> find_arch(std::string_view name) {
    for (const ArchTraits& t : kArchs)
        if (t.name == name) return t;
    return std::nullopt;
}

const ArchTraits& arch_traits(Arch a) {
    for (const ArchTraits& t : kArchs)
        if (t.arch == a) return t;
    return kArchs[0];
}

std::string_view arch_name(Arch a) { return arch_traits(a).name; }

std::string_view supported_arch_list() {
    return "llama, mistral, qwen2, qwen3, qwen3moe, gemma2, gemma3, phi3, deepseek2, gpt-oss";
}

}  // namespace strata::models
