#include "models/hparams.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "models/gguf_file.h"

namespace strata::models {

namespace {

constexpr std::string_view kBrokenMetadata = "the file's metadata is broken: check it against its source, or download it again";

int32_t positive(const std::string& key, int64_t v) {
    if (v <= 0 || v > (int64_t{1} << 24))
        throw FormatError(fmt::format("GGUF key '{}' is {}, expected a positive count", key, v),
                          "the model file is corrupt");
    return static_cast<int32_t>(v);
}

// Keys of one architecture: "<arch>.<key>".
struct Keys {
    const GgufFile& f;
    std::string arch;

    std::string key(std::string_view k) const { return fmt::format("{}.{}", arch, k); }
    bool has(std::string_view k) const { return f.has(key(k)); }
    int32_t count(std::string_view k) const { return positive(key(k), f.get_int(key(k))); }
    int32_t count_or(std::string_view k, int32_t dflt) const { return has(k) ? count(k) : dflt; }
    float number_or(std::string_view k, double dflt) const { return static_cast<float>(f.get_float_opt(key(k)).value_or(dflt)); }
};

void read_rope_scaling(const Keys& k, const ArchTraits& t, Hparams& h) {
    // As llama.cpp: the factor scales positions linearly unless the type names another method.
    const std::string scaling = k.f.get_string_opt(k.key("rope.scaling.type")).value_or("linear");
    const double factor = k.f.get_float_opt(k.key("rope.scaling.factor")).value_or(k.number_or("rope.scale_linear", 1.0));
    // YaRN applies to every architecture, as llama.cpp applies it (a Qwen2.5 file extended to 128K).
    const bool yarn = scaling == "yarn";
    if (scaling != "linear" && scaling != "none" && !yarn)
        throw FormatError(fmt::format("rope scaling type '{}' is not supported for {}", scaling, t.name),
                          "supported: none, linear, yarn (and llama3 rope_freqs, phi3 long/short rope factors)");
    if (!(factor >= 0 && std::isfinite(factor)))  // NaN fails both; infinity would stop the rotation
        throw FormatError(fmt::format("rope scaling factor {} is not a finite number of 0 or more", factor), std::string(kBrokenMetadata));
    if (factor > 0) h.rope_freq_scale = static_cast<float>(1.0 / factor);
    h.rope_attn_factor = k.number_or("rope.scaling.attn_factor", 1.0);
    h.n_ctx_orig = k.count_or("rope.scaling.original_context_length", h.n_ctx_train);
    if (!yarn) return;
    h.yarn_ext_factor = k.number_or("rope.scaling.yarn_ext_factor", 1.0);
    h.yarn_beta_fast = k.number_or("rope.scaling.yarn_beta_fast", 32.0);
    h.yarn_beta_slow = k.number_or("rope.scaling.yarn_beta_slow", 1.0);
    // DeepSeek's YaRN moves its magnitude into the attention scale (read_mla, from rope_attn_factor
    // where the file names no multiplier); the others rotate by their layer's own (rope_spec).
    if (!t.mla) h.yarn_layer_magnitude = true;
    else if (!k.has("rope.scaling.yarn_log_multiplier")) h.rope_attn_factor *= static_cast<float>(yarn_mscale(1.0 / h.rope_freq_scale));
}

// Sliding-window layers: a period (every period-th layer is global) or one flag per layer.
void read_sliding_window(const Keys& k, const ArchTraits& t, Hparams& h) {
    h.n_swa = k.has("attention.sliding_window") ? static_cast<int32_t>(k.f.get_int(k.key("attention.sliding_window"))) : 0;
    // Gemma 2 files from before the key existed slide over 4096 positions (llama.cpp's default).
    if (!k.has("attention.sliding_window") && h.arch == Arch::Gemma2) h.n_swa = 4096;
    // Phi-3 writes its window, but llama.cpp (and so its files' perplexity) attends to everything.
    if (h.n_swa < 0 || t.swa_period == 0) h.n_swa = 0;
    h.swa_layers.assign(static_cast<size_t>(h.n_layer), false);
    if (h.n_swa == 0) return;
    int64_t period = t.swa_period;
    if (const GgufValue* v = k.f.find(k.key("attention.sliding_window_pattern")); v && v->type == GgufType::ARRAY) {
        const auto& items = v->as_array(k.key("attention.sliding_window_pattern")).items;
        if (items.size() != h.swa_layers.size())
            throw FormatError(fmt::format("{} has {} entries for {} layers", k.key("attention.sliding_window_pattern"),
                                          items.size(), h.n_layer));
        for (size_t il = 0; il < items.size(); ++il)
            h.swa_layers[il] = items[il].type == GgufType::BOOL ? items[il].as_bool("") : items[il].as_int("") != 0;
    } else {
        if (v) period = v->as_int(k.key("attention.sliding_window_pattern"));
        for (int il = 0; il < h.n_layer; ++il) h.swa_layers[il] = period == 0 || il % period < period - 1;
    }
    h.rope_freq_base_swa = k.number_or("rope.freq_base_swa", t.swa_local_rope ? 10000.0 : h.rope_freq_base);
    // Gemma 3's local layers keep unscaled positions; Gemma 2 and gpt-oss scale both kinds alike.
    h.rope_freq_scale_swa = t.swa_local_rope ? 1.0f : h.rope_freq_scale;
}

void read_gemma(const Keys& k, const ArchTraits& t, Hparams& h) {
    if (t.embd_scaled) h.embd_scale = std::sqrt(static_cast<float>(h.n_embd));
    if (t.attn_softcap) h.attn_softcap = k.number_or("attn_logit_softcapping", 0.0);
    h.final_softcap = k.number_or("final_logit_softcapping", 0.0);
    // Gemma scales queries by query_pre_attn_scalar^-1/2, which GGUF files do not record:
    // llama.cpp takes n_embd / n_head for the 27B models (46 and 62 layers) and head_dim otherwise.
    const bool gemma_27b = (h.arch == Arch::Gemma2 && h.n_layer == 46) || (h.arch == Arch::Gemma3 && h.n_layer == 62);
    if (gemma_27b) h.attn_scale = 1.0f / std::sqrt(static_cast<float>(h.n_embd / h.n_head));
}

void read_experts(const Keys& k, const ArchTraits& t, Hparams& h) {
    MoeParams& m = h.moe;
    if (!k.has("expert_count")) {
        if (t.needs_experts)
            throw FormatError(fmt::format("GGUF key '{}' is missing", k.key("expert_count")),
                              "a mixture-of-experts model needs its expert count: the file is incomplete");
        return;
    }
    m.n_expert = k.count("expert_count");
    m.n_expert_used = k.count("expert_used_count");
    if (m.n_expert_used > m.n_expert)
        throw FormatError(fmt::format("expert_used_count {} is more than expert_count {}", m.n_expert_used, m.n_expert));
    // qwen3moe names each expert's width; mixtral's experts are feed_forward_length wide.
    m.n_ff_exp = k.count_or("expert_feed_forward_length", h.arch == Arch::Llama ? h.n_ff : h.n_ff / m.n_expert_used);
    // deepseek2 counts its shared experts, each as wide as a routed one (one ffn_*_shexp of them all).
    m.n_ff_shexp = k.has("expert_shared_count") ? m.n_ff_exp * k.count("expert_shared_count")
                                                 : k.count_or("expert_shared_feed_forward_length", 0);
    m.gating = t.gating;
    if (t.gating_from_file) {
        const int64_t gating = k.f.get_int_opt(k.key("expert_gating_func")).value_or(t.gating == ExpertGating::Sigmoid ? 2 : 1);
        if (gating != 1 && gating != 2)
            throw FormatError(fmt::format("{} is {}; Strata routes experts by softmax (1) or sigmoid (2)",
                                          k.key("expert_gating_func"), gating),
                              "this mixture-of-experts model's router is not supported");
        m.gating = gating == 2 ? ExpertGating::Sigmoid : ExpertGating::Softmax;
    }
    m.norm_weights = k.f.get_bool_opt(k.key("expert_weights_norm")).value_or(t.expert_norm);
    const float scale = k.number_or("expert_weights_scale", 1.0);
    m.weights_scale = scale == 0.0f ? 1.0f : scale;
    m.n_dense_lead = k.has("leading_dense_block_count") ? static_cast<int32_t>(k.f.get_int(k.key("leading_dense_block_count"))) : 0;
    if (m.n_dense_lead < 0 || m.n_dense_lead > h.n_layer)
        throw FormatError(fmt::format("leading_dense_block_count {} does not fit {} layers", m.n_dense_lead, h.n_layer));
    if (m.n_dense_lead == h.n_layer) {  // every layer dense: no expert to route, a dense model
        m = MoeParams{};
        return;
    }
    m.n_group = k.count_or("expert_group_count", 0);
    m.n_group_used = k.count_or("expert_group_used_count", 0);
    if (m.n_group > 1 && (m.n_expert % m.n_group != 0 || m.n_group_used < 1 || m.n_group_used >= m.n_group))
        throw FormatError(fmt::format("{} experts in {} groups, {} of them used, do not make equal groups", m.n_expert,
                                      m.n_group, m.n_group_used),
                          "the model file is corrupt");
}

// deepseek2's latent attention: sizes from the MLA keys (read_mla's MlaParams); its YaRN
// magnitude becomes part of the attention scale, as llama.cpp's deepseek2 graph computes it.
void read_mla(const Keys& k, Hparams& h) {
    MlaParams& m = h.mla;
    m.kv_lora_rank = k.count("attention.kv_lora_rank");
    m.q_lora_rank = k.count_or("attention.q_lora_rank", 0);
    m.qk_rope = h.n_rot;
    // Files converted for the absorbed decode name the per-head sizes *_mla and give the cached
    // row as key_length / value_length; older files give the per-head sizes there.
    m.split_kv_b = k.has("attention.key_length_mla");
    const int32_t k_head = m.split_kv_b ? k.count("attention.key_length_mla") : h.head_dim;
    m.v_head_dim = m.split_kv_b ? k.count("attention.value_length_mla") : k.count_or("attention.value_length", k_head);
    if (k_head <= m.qk_rope)
        throw FormatError(fmt::format("key heads of {} values leave nothing beside {} RoPE dimensions", k_head, m.qk_rope));
    m.qk_nope = k_head - m.qk_rope;
    if (m.split_kv_b && (h.head_dim != m.cache_width() || k.count_or("attention.value_length", m.kv_lora_rank) != m.kv_lora_rank))
        throw FormatError(fmt::format("key_length {} is not kv_lora_rank {} + RoPE dimensions {}", h.head_dim, m.kv_lora_rank,
                                      m.qk_rope),
                          "the model file is corrupt");
    h.head_dim = k_head;
    h.n_head_kv = 1;
    // llama.cpp's converter writes 0.1 x mscale_all_dim (DeepSeek's config) as the log multiplier.
    const double log_mul = k.number_or("rope.scaling.yarn_log_multiplier", 0.0) / 0.1;
    const double mscale = h.rope_attn_factor * (1.0 + 0.1 * log_mul * std::log(1.0 / h.rope_freq_scale));
    h.attn_scale = static_cast<float>(mscale * mscale / std::sqrt(static_cast<double>(k_head)));
}

}  // namespace

int32_t Hparams::n_ff_max() const {
    if (!moe.enabled()) return n_ff;
    return std::max({moe.n_ff_exp, moe.n_ff_shexp, moe.n_dense_lead > 0 ? n_ff : 0});
}

Hparams Hparams::from_gguf(const GgufFile& f) {
    Hparams h;
    const std::string arch = f.get_string("general.architecture");
    const std::optional<ArchTraits> t = find_arch(arch);
    if (!t)
        throw FormatError(fmt::format("model architecture '{}' is not supported", arch),
                          fmt::format("supported architectures: {}", supported_arch_list()));
    h.arch = t->arch;
    const Keys k{f, arch};

    h.n_embd = k.count("embedding_length");
    h.n_layer = k.count("block_count");
    h.n_head = k.count("attention.head_count");
    h.n_ff = k.count("feed_forward_length");
    h.n_ctx_train = k.count("context_length");
    h.n_head_kv = k.count_or("attention.head_count_kv", h.n_head);
    h.head_dim = k.count_or("attention.key_length", h.n_embd / h.n_head);
    h.n_rot = k.count_or("rope.dimension_count", h.head_dim);
    h.rope_freq_base = k.number_or("rope.freq_base", 10000.0);
    if (!(h.rope_freq_base > 0 && std::isfinite(h.rope_freq_base)))  // NaN fails both
        throw FormatError(fmt::format("rope.freq_base {} is not a finite number above 0", h.rope_freq_base), std::string(kBrokenMetadata));
    h.rms_eps = k.number_or("attention.layer_norm_rms_epsilon", 1e-5);
    if (!(h.rms_eps >= 0 && std::isfinite(h.rms_eps)))  // NaN fails both
        throw FormatError(fmt::format("attention.layer_norm_rms_epsilon {} is not a small number of 0 or more", h.rms_eps),
                          std::string(kBrokenMetadata));
    read_rope_scaling(k, *t, h);

    h.rope_mode = t->rope_mode;
    h.qkv_bias = t->qkv_bias;
    h.qk_norm = t->qk_norm;
    h.post_norms = t->post_norms;
    h.ffn_act = t->ffn_act;
    h.attn_sinks = t->attn_sinks;
    h.attn_out_bias = t->attn_out_bias;
    read_sliding_window(k, *t, h);
    read_gemma(k, *t, h);
    read_experts(k, *t, h);
    if (t->mla) read_mla(k, h);

    // The embedding table is what the forward pass indexes, so its rows define the vocabulary.
    if (const TensorInfo* embd = f.find_tensor("token_embd.weight"))
        h.n_vocab = positive("token_embd.weight rows", embd->ne[1]);
    else
        throw FormatError("model tensor 'token_embd.weight' is missing", "the file is not a complete model");

    if (h.n_head % h.n_head_kv != 0)
        throw FormatError(fmt::format("head_count {} is not a multiple of head_count_kv {}", h.n_head, h.n_head_kv), std::string(kBrokenMetadata));
    if (h.n_rot > h.head_dim || h.n_rot % 2 != 0)
        throw FormatError(fmt::format("rope.dimension_count {} does not fit head size {}", h.n_rot, h.head_dim), std::string(kBrokenMetadata));
    if (!h.mla.enabled() && k.has("attention.value_length") && k.count("attention.value_length") != h.head_dim)
        throw FormatError(fmt::format("value heads of {} and key heads of {} values differ",
                                      k.count("attention.value_length"), h.head_dim),
                          "Strata runs models whose keys and values have the same head size");
    return h;
}

}  // namespace strata::models
