#include "models/hparams.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "models/gguf_file.h"

namespace strata::models {

namespace {

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

void read_rope_scaling(const Keys& k, Hparams& h) {
    // As llama.cpp: the factor scales positions linearly unless the type names another method.
    const std::string scaling = k.f.get_string_opt(k.key("rope.scaling.type")).value_or("linear");
    const double factor = k.f.get_float_opt(k.key("rope.scaling.factor")).value_or(k.number_or("rope.scale_linear", 1.0));
    if (scaling != "linear" && scaling != "none")
        throw FormatError(fmt::format("rope scaling type '{}' is not supported", scaling),
                          "supported: none, linear (and llama3 rope_freqs and phi3 long/short rope factors)");
    if (factor < 0) throw FormatError(fmt::format("rope scaling factor {} is negative", factor));
    if (factor > 0) h.rope_freq_scale = static_cast<float>(1.0 / factor);
    h.rope_attn_factor = k.number_or("rope.scaling.attn_factor", 1.0);
    h.n_ctx_orig = k.count_or("rope.scaling.original_context_length", h.n_ctx_train);
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
    h.rope_freq_base_swa = k.number_or("rope.freq_base_swa", h.arch == Arch::Gemma2 ? h.rope_freq_base : 10000.0);
    // Gemma 3's local layers keep unscaled positions; Gemma 2 scales both kinds alike.
    h.rope_freq_scale_swa = h.arch == Arch::Gemma2 ? h.rope_freq_scale : 1.0f;
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
    m.n_ff_shexp = k.count_or("expert_shared_feed_forward_length", 0);
    const int64_t gating = k.f.get_int_opt(k.key("expert_gating_func")).value_or(1);
    if (gating != 1 && gating != 2)
        throw FormatError(fmt::format("{} is {}; Strata routes experts by softmax (1) or sigmoid (2)",
                                      k.key("expert_gating_func"), gating),
                          "this mixture-of-experts model's router is not supported");
    m.gating = gating == 2 ? ExpertGating::Sigmoid : ExpertGating::Softmax;
    m.norm_weights = k.f.get_bool_opt(k.key("expert_weights_norm")).value_or(true);
    const float scale = k.number_or("expert_weights_scale", 1.0);
    m.weights_scale = scale == 0.0f ? 1.0f : scale;
}

}  // namespace

int32_t Hparams::n_ff_max() const {
    if (!moe.enabled()) return n_ff;
    return std::max(moe.n_ff_exp, moe.n_ff_shexp);
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
    h.rms_eps = k.number_or("attention.layer_norm_rms_epsilon", 1e-5);
    read_rope_scaling(k, h);

    h.rope_mode = t->rope_mode;
    h.qkv_bias = t->qkv_bias;
    h.qk_norm = t->qk_norm;
    h.post_norms = t->post_norms;
    h.ffn_act = t->ffn_act;
    read_sliding_window(k, *t, h);
    read_gemma(k, *t, h);
    read_experts(k, *t, h);

    // The embedding table is what the forward pass indexes, so its rows define the vocabulary.
    if (const TensorInfo* embd = f.find_tensor("token_embd.weight"))
        h.n_vocab = positive("token_embd.weight rows", embd->ne[1]);
    else
        throw FormatError("model tensor 'token_embd.weight' is missing", "the file is not a complete model");

    if (h.n_head % h.n_head_kv != 0)
        throw FormatError(fmt::format("head_count {} is not a multiple of head_count_kv {}", h.n_head, h.n_head_kv));
    if (h.n_rot > h.head_dim || h.n_rot % 2 != 0)
        throw FormatError(fmt::format("rope.dimension_count {} does not fit head size {}", h.n_rot, h.head_dim));
    if (k.has("attention.value_length") && k.count("attention.value_length") != h.head_dim)
        throw FormatError(fmt::format("value heads of {} and key heads of {} values differ",
                                      k.count("attention.value_length"), h.head_dim),
                          "Strata runs models whose keys and values have the same head size");
    return h;
}

}  // namespace strata::models
