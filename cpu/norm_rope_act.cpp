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
        double theta = static_cast<double>(pos) * std::pow(static_cast<double>(p.freq_base), -2.0 * i / p.n_rot);
        if (p.freq_factors) theta /= p.freq_factors[i];
        const double interpolated = theta * p.freq_scale;
        if (p.ext_factor > 0) {
            const double y = (i - p.yarn_low) / std::max(0.001, static_cast<double>(p.yarn_high - p.yarn_low));
            const double mix = (1.0 - std::clamp(y, 0.0, 1.0)) * p.ext_factor;
            theta = interpolated * (1.0 - mix) + theta * mix;
        } else {
            theta = interpolated;
        }
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

YarnRamp yarn_ramp(int32_t n_rot, int32_t n_ctx_orig, float freq_base, float beta_fast, float beta_slow) {
    // The pair index whose wavelength 2 pi base^(2i/n_rot) fits n_ctx_orig / beta times.
    auto pair_for = [&](float beta) {
        return n_rot * std::log(n_ctx_orig / (beta * 2.0 * M_PI)) / (2.0 * std::log(static_cast<double>(freq_base)));
    };
    return {static_cast<float>(std::max(0.0, std::floor(pair_for(beta_fast)))),
            static_cast<float>(std::min(n_rot - 1.0, std::ceil(pair_for(beta_slow))))};
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

void swiglu_clamped(float* gate, const float* up, int64_t n, float alpha, float limit) {
    for (int64_t i = 0; i < n; ++i) {
        const float g = std::min(gate[i], limit), u = std::clamp(up[i], -limit, limit);
        gate[i] = g / (1.0f + std::exp(-alpha * g)) * (u + 1.0f);
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
