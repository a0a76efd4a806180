#pragma once
// Architecture and hyperparameters of a llama-family model, read from GGUF metadata.
#include <cstdint>
#include <string>
#include <string_view>

namespace strata::models {

class GgufFile;

enum class Arch { Llama, Mistral, Qwen2 };
enum class RopeMode { Normal, NeoX };  // adjacent pairs (GPT-J) or split halves (GPT-NeoX)

std::string_view arch_name(Arch a);
// Names of every supported architecture, for error messages.
std::string_view supported_arch_list();

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

    int32_t n_embd_kv() const { return n_head_kv * head_dim; }
    int32_t n_embd_q() const { return n_head * head_dim; }

    // Throws FormatError for an unsupported architecture or inconsistent values.
    static Hparams from_gguf(const GgufFile& f);
};

}  // namespace strata::models
