#pragma once
// Element-wise and per-row operations of the llama block, on float32 rows.
#include <cstdint>

namespace strata::cpu {

// y = x / rms(x) * w, over rows of n values (x and y may alias).
void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps);

struct RopeParams {
    int32_t head_dim = 0;
    int32_t n_rot = 0;         // rotated dimensions at the start of each head
    float freq_base = 10000.0f;
    float freq_scale = 1.0f;
    bool neox = false;         // pairs (i, i + n_rot/2) instead of (2i, 2i+1)
    const float* freq_factors = nullptr;  // n_rot/2 divisors (llama3 rope_freqs, phi3 long/short factors), or null
    float attn_factor = 1.0f;  // cos and sin scaled by it (phi3 LongRoPE, YaRN's magnitude)
    // YaRN (deepseek2, gpt-oss): pair i's angle is the interpolated one (freq_scale) blended with
    // the original by ramp(i) * ext_factor, ramp(i) = 1 - clamp((i - yarn_low) / (yarn_high -
    // yarn_low), 0, 1): pairs below yarn_low keep their frequency, those above yarn_high are
    // interpolated. ext_factor 0: plain linear scaling.
    float ext_factor = 0.0f;
    float yarn_low = 0.0f;
    float yarn_high = 0.0f;
};
// Rotates n_heads heads of one token in place, at position `pos`.
void rope(float* x, int32_t n_heads, int64_t pos, const RopeParams& p);

// YaRN's ramp ends for n_rot rotated dimensions trained on n_ctx_orig positions: the pair
// indices whose wavelength spans beta_fast (low, rounded down) and beta_slow (high, rounded up)
// turns over n_ctx_orig positions, clamped to [0, n_rot - 1].
struct YarnRamp {
    float low = 0.0f;
    float high = 0.0f;
};
YarnRamp yarn_ramp(int32_t n_rot, int32_t n_ctx_orig, float freq_base, float beta_fast, float beta_slow);

// gate = silu(gate) * up, n values.
void swiglu(float* gate, const float* up, int64_t n);
// gate = gelu(gate) * up, n values, GELU in its tanh approximation (Gemma's GeGLU).
void geglu(float* gate, const float* up, int64_t n);
// gpt-oss's clamped SwiGLU: with g = min(gate, limit) and u = clamp(up, -limit, limit),
// gate = g * sigmoid(alpha * g) * (u + 1), n values.
void swiglu_clamped(float* gate, const float* up, int64_t n, float alpha, float limit);
// y += x
void add(float* y, const float* x, int64_t n);
// x = cap * tanh(x / cap), n values: a soft cap (gemma's final logits).
void softcap(float* x, int64_t n, float cap);
// In-place softmax of n values; returns nothing, normalises to sum 1.
void softmax(float* x, int64_t n);

}  // namespace strata::cpu
