// RoPE's rotation of one pair, shared by the rope kernel and the KV store that rotates keys on
// their way into the cache, so both give the same bits. theta in double, like the CPU, so long
// positions stay exact.
#pragma once

#include "gpu/device.h"

namespace strata::gpu {

// cos and sin of pair i's angle at position `pos`, scaled by attn_factor; with YaRN, the angle
// between the interpolated and the extrapolated one by the pair's place on the ramp.
__device__ __forceinline__ float2 rope_cos_sin(const RopeArgs& a, int32_t pos, int i) {
    double theta = static_cast<double>(pos) * pow(static_cast<double>(a.freq_base), -2.0 * i / a.n_rot);
    if (a.freq_factors) theta /= a.freq_factors[i];
    const double interpolated = theta * a.freq_scale;
    if (a.ext_factor > 0.0f) {
        const double y = (i - a.yarn_low) / fmax(0.001, static_cast<double>(a.yarn_high - a.yarn_low));
        const double mix = (1.0 - fmin(fmax(y, 0.0), 1.0)) * a.ext_factor;
        theta = interpolated * (1.0 - mix) + theta * mix;
    } else {
        theta = interpolated;
    }
    return make_float2(static_cast<float>(cos(theta) * a.attn_factor), static_cast<float>(sin(theta) * a.attn_factor));
}

// The pair (x0, x1) rotated: (x0 c - x1 s, x0 s + x1 c), rounded as the CPU rounds it (no fused multiply-add).
__device__ __forceinline__ float2 rope_rotate(float x0, float x1, float2 cs) {
    return make_float2(__fsub_rn(__fmul_rn(x0, cs.x), __fmul_rn(x1, cs.y)), __fadd_rn(__fmul_rn(x0, cs.y), __fmul_rn(x1, cs.x)));
}

// Value i of a row of n_heads heads after RoPE at `pos`, read from the unrotated row.
__device__ __forceinline__ float rope_value(const float* row, int64_t i, int32_t pos, const RopeArgs& a) {
    const int j = static_cast<int>(i % a.head_dim);
    if (j >= a.n_rot) return row[i];
    const int half = a.n_rot / 2;
    const bool first = a.neox ? j < half : j % 2 == 0;
    const int pair = a.neox ? (first ? j : j - half) : j / 2;
    const int64_t other = a.neox ? (first ? i + half : i - half) : (first ? i + 1 : i - 1);
    const float2 r = first ? rope_rotate(row[i], row[other], rope_cos_sin(a, pos, pair))
                           : rope_rotate(row[other], row[i], rope_cos_sin(a, pos, pair));
    return first ? r.x : r.y;
}

// Head `head` (n_rot/2 pairs at its start) rotated in place at `pos`, the pairs shared out
// among `n_threads` threads, this one `thread`.
__device__ __forceinline__ void rope_head(float* head, int32_t pos, const RopeArgs& a, int thread, int n_threads) {
    const int half = a.n_rot / 2;
    for (int i = thread; i < half; i += n_threads) {
        const float2 cs = rope_cos_sin(a, pos, i);
        const int ia = a.neox ? i : 2 * i, ib = a.neox ? i + half : 2 * i + 1;
        const float2 r = rope_rotate(head[ia], head[ib], cs);
        head[ia] = r.x;
        head[ib] = r.y;
    }
}

// Row t's heads start at x + t * row_width (0: the heads alone).
__device__ __forceinline__ float* rope_row(float* x, int64_t t, const RopeArgs& a) {
    return x + t * (a.row_width > 0 ? a.row_width : a.n_heads * static_cast<int64_t>(a.head_dim));
}

}  // namespace strata::gpu
