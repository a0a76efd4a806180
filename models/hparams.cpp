#include "models/hparams.h"

#include <array>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "models/gguf_file.h"

namespace strata::models {

namespace {
constexpr std::array<std::pair<std::string_view, Arch>, 3> kArchs = {{
    {"llama", Arch::Llama},
    {"mistral", Arch::Mistral},
    {"qwen2", Arch::Qwen2},
}};

int32_t positive(const GgufFile& f, const std::string& key, int64_t v) {
    if (v <= 0 || v > (int64_t{1} << 24))
        throw FormatError(fmt::format("GGUF key '{}' is {}, expected a positive count", key, v),
                          "the model file is corrupt");
    return static_cast<int32_t>(v);
}
}  // namespace

std::string_view arch_name(Arch a) {
    for (auto [name, arch] : kArchs)
        if (arch == a) return name;
    return "?";
}

std::string_view supported_arch_list() { return "llama, mistral, qwen2"; }

Hparams Hparams::from_gguf(const GgufFile& f) {
    Hparams h;
    const std::string arch = f.get_string("general.architecture");
    bool found = false;
    for (auto [name, a] : kArchs)
        if (name == arch) h.arch = a, found = true;
    if (!found)
        throw FormatError(fmt::format("model architecture '{}' is not supported", arch),
                          fmt::format("supported architectures: {}", supported_arch_list()));

    auto key = [&](std::string_view k) { return fmt::format("{}.{}", arch, k); };
    auto count = [&](std::string_view k) { return positive(f, key(k), f.get_int(key(k))); };

    h.n_embd = count("embedding_length");
    h.n_layer = count("block_count");
    h.n_head = count("attention.head_count");
    h.n_ff = count("feed_forward_length");
    h.n_ctx_train = count("context_length");
    h.n_head_kv = f.has(key("attention.head_count_kv")) ? count("attention.head_count_kv") : h.n_head;
    h.head_dim = f.has(key("attention.key_length")) ? count("attention.key_length") : h.n_embd / h.n_head;
    h.n_rot = f.has(key("rope.dimension_count")) ? count("rope.dimension_count") : h.head_dim;
    h.rope_freq_base = static_cast<float>(f.get_float_opt(key("rope.freq_base")).value_or(10000.0));
    h.rms_eps = static_cast<float>(f.get_float_opt(key("attention.layer_norm_rms_epsilon")).value_or(1e-5));

    const std::string scaling = f.get_string_opt(key("rope.scaling.type")).value_or("none");
    double factor = f.get_float_opt(key("rope.scaling.factor")).value_or(f.get_float_opt(key("rope.scale_linear")).value_or(1.0));
    if (scaling == "linear" || (scaling == "none" && factor != 1.0 && f.has(key("rope.scale_linear")))) {
        if (factor <= 0) throw FormatError(fmt::format("rope scaling factor {} is not positive", factor));
        h.rope_freq_scale = static_cast<float>(1.0 / factor);
    } else if (scaling != "none") {
        throw FormatError(fmt::format("rope scaling type '{}' is not supported", scaling),
                          "supported: none, linear (and llama3 rope_freqs factors)");
    }

    h.rope_mode = h.arch == Arch::Qwen2 ? RopeMode::NeoX : RopeMode::Normal;
    h.qkv_bias = h.arch == Arch::Qwen2;

    // The embedding table is what the forward pass indexes, so its rows define the vocabulary.
    if (const TensorInfo* embd = f.find_tensor("token_embd.weight"))
        h.n_vocab = positive(f, "token_embd.weight rows", embd->ne[1]);
    else
        throw FormatError("model tensor 'token_embd.weight' is missing", "the file is not a complete llama-family model");

    if (h.n_head % h.n_head_kv != 0)
        throw FormatError(fmt::format("head_count {} is not a multiple of head_count_kv {}", h.n_head, h.n_head_kv));
    if (h.n_rot > h.head_dim || h.n_rot % 2 != 0)
        throw FormatError(fmt::format("rope.dimension_count {} does not fit head size {}", h.n_rot, h.head_dim));
    return h;
}

}  // namespace strata::models
