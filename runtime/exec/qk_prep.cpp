#include "runtime/exec/qk_prep.h"

namespace strata::runtime {

namespace {
void prepare(const models::Hparams& hp, const WeightRef& bias, const WeightRef& norm, const cpu::RopeParams& rope,
             float* x, int32_t n_heads, int64_t pos) {
    if (bias) cpu::add(x, bias.f32(), static_cast<int64_t>(n_heads) * hp.head_dim);
    if (norm)
        for (int32_t h = 0; h < n_heads; ++h) {
            float* head = x + static_cast<int64_t>(h) * hp.head_dim;
            cpu::rms_norm(head, norm.f32(), head, hp.head_dim, hp.rms_eps);
        }
    cpu::rope(x, n_heads, pos, rope);
}
}  // namespace

cpu::RopeParams layer_rope(const models::Hparams& hp, const ModelWeights& w, int il, int64_t n_ctx) {
    cpu::RopeParams r;
    r.head_dim = hp.head_dim;
    r.n_rot = hp.n_rot;
    const bool swa = hp.is_swa(il);
    r.freq_base = swa ? hp.rope_freq_base_swa : hp.rope_freq_base;
    r.freq_scale = swa ? hp.rope_freq_scale_swa : hp.rope_freq_scale;
    r.neox = hp.rope_mode == models::RopeMode::NeoX;
    const WeightRef& factors = w.rope_freqs ? w.rope_freqs : n_ctx > hp.n_ctx_orig ? w.rope_long : w.rope_short;
    r.freq_factors = factors ? factors.f32() : nullptr;
    r.attn_factor = hp.rope_attn_factor;
    return r;
}

void prepare_queries(const models::Hparams& hp, const LayerWeights& l, const cpu::RopeParams& rope, float* q, int64_t pos) {
    prepare(hp, l.bq, l.q_norm, rope, q, hp.n_head, pos);
}

void prepare_keys(const models::Hparams& hp, const LayerWeights& l, const cpu::RopeParams& rope, float* k, int64_t pos) {
    prepare(hp, l.bk, l.k_norm, rope, k, hp.n_head_kv, pos);
}

}  // namespace strata::runtime
