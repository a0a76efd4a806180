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
    float attn_factor = 1.0f;  // cos and sin scaled by it (phi3 LongRoPE)
};
// Rotates n_heads heads of one token in place, at position `pos`.
void rope(float* x, int32_t n_heads, int64_t pos, const RopeParams& p);

// gate = silu(gate) * up, n values.
void swiglu(float* gate, const float* up, int64_t n);
// gate = gelu(gate) * up, n values, GELU in its tanh approximation (Gemma's GeGLU).
void geglu(float* gate, const float* up, int64_t n);
// y += x
void add(float* y, const float* x, int64_t n);
// x = cap * tanh(x / cap), n values: a soft cap (gemma's final logits).
void softcap(float* x, int64_t n, float cap);
// In-place softmax of n values; returns nothing, normalises to sum 1.
void softmax(float* x, int64_t n);

}  // namespace strata::cpu
