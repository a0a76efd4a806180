#include "cpu/norm_rope_act.h"

#include <algorithm>
#include <cmath>

#include "cpu/cpu_features.h"
#include "cpu/gemm_x86.h"

namespace strata::cpu {

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
    const float scale = 1.0f / std::sqrt(static_cast<float>(ss / n) + eps);
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale * w[i];
}

void rope(float* x, int32_t n_heads, int64_t pos, const RopeParams& p) {
    const int32_t half = p.n_rot / 2;
    for (int32_t i = 0; i < half; ++i) {
        // theta_i = pos * base^(-2i/n_rot), computed in double so long contexts keep precision.
        double theta = static_cast<double>(pos) * p.freq_scale * std::pow(static_cast<double>(p.freq_base), -2.0 * i / p.n_rot);
        if (p.freq_factors) theta /= p.freq_factors[i];
        const float c = static_cast<float>(std::cos(theta) * p.attn_factor), s = static_cast<float>(std::sin(theta) * p.attn_factor);
        for (int32_t h = 0; h < n_heads; ++h) {
            float* head = x + static_cast<int64_t>(h) * p.head_dim;
            const int32_t a = p.neox ? i : 2 * i, b = p.neox ? i + half : 2 * i + 1;
            const float x0 = head[a], x1 = head[b];
            head[a] = x0 * c - x1 * s;
            head[b] = x0 * s + x1 * c;
        }
    }
}

void swiglu(float* gate, const float* up, int64_t n) {
    if (active_path() == CpuPath::Avx512) return swiglu_avx512(gate, up, n);
    for (int64_t i = 0; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void geglu(float* gate, const float* up, int64_t n) {
    constexpr float kSqrt2OverPi = 0.7978845608028654f;
    for (int64_t i = 0; i < n; ++i) {
        const float x = gate[i];
        gate[i] = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + 0.044715f * x * x))) * up[i];
    }
}

void add(float* y, const float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void softcap(float* x, int64_t n, float cap) {
    for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

void softmax(float* x, int64_t n) {
    const float m = *std::max_element(x, x + n);
    float sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += (x[i] = std::exp(x[i] - m));
    const float inv = 1.0f / sum;
    for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace strata::cpu
