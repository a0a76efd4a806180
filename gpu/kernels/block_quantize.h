#pragma once
// Activation block b of a row quantized to the CPU's Q8x2 format, one value after another: the
// host's twin of the quantize kernel (matvec.cu), built from the same per-value operations
// (block_common.h), so the tests check on the host that they give cpu::quantize_act_ref's bytes.
#include "gpu/kernels/block_common.h"

namespace strata::gpu::blocks {

// The block's scales and sums once its levels are written (cpu::finish_q8x2_block).
STRATA_HD void finish_block_q8x2(uint8_t* row, int64_t n, int64_t b, float d, const int32_t s16[2]) {
    const int64_t nb = n / kActBlock;
    auto* dc = reinterpret_cast<float*>(row + 2 * n);
    auto* s32 = reinterpret_cast<int32_t*>(dc + 2 * nb);
    dc[b] = d * 0x1p-8f;
    s32[b] = s16[0] + s16[1];
    dc[nb + b] = dc[b] * static_cast<float>(s32[b]);
    s32[nb + 2 * b] = s16[0];
    s32[nb + 2 * b + 1] = s16[1];
}

STRATA_HD void quantize_block_q8x2(const float* x, uint8_t* row, int64_t n, int64_t b, bool two_level) {
    const float* xb = x + kActBlock * b;
    float amax = 0.0f;
    for (int j = 0; j < kActBlock; ++j) amax = fmaxf(amax, fabsf(xb[j]));
    const Q8x2Scale s = q8x2_scale(amax);
    int32_t s16[2] = {0, 0};
    for (int j = 0; j < kActBlock; ++j) {
        int8_t hi, lo;
        q8x2_levels(xb[j], s, two_level, hi, lo);
        row[kActBlock * b + j] = static_cast<uint8_t>(hi);
        row[n + kActBlock * b + j] = static_cast<uint8_t>(lo);
        s16[j / 16] += 256 * int32_t(hi) + int32_t(lo);
    }
    finish_block_q8x2(row, n, b, s.d, s16);
}

}  // namespace strata::gpu::blocks
