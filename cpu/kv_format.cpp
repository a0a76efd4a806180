#include "cpu/kv_format.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "cpu/quant_ref.h"

namespace strata::cpu {

namespace {
// IEEE half -> float, exact for every input (subnormals, infinities and NaN included), without
// branches or a call so that converting a row vectorizes (Maratyszcza's FP16 method; the
// reference fp16_to_fp32 is out of line and branches on subnormals).
inline float half_to_float(f16_bits h) {
    const uint32_t w = uint32_t(h) << 16, sign = w & 0x80000000u, two_w = w + w;
    const float normal = std::bit_cast<float>((two_w >> 4) + (0xE0u << 23)) * 0x1p-112f;
    const float subnormal = std::bit_cast<float>((two_w >> 17) | (126u << 23)) - 0.5f;
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(two_w < (1u << 27) ? subnormal : normal));
}
}  // namespace

bool is_kv_type(DType type) {
    return type == DType::F32 || type == DType::F16 || type == DType::BF16 || type == DType::Q8_0 || type == DType::Q4_0;
}

void store_kv_row(DType type, const float* x, void* row, int64_t n) {
    switch (type) {
        case DType::F32: std::memcpy(row, x, n * sizeof(float)); return;
        case DType::F16: {
            auto* h = static_cast<f16_bits*>(row);
            for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_fp16(x[i]);
            return;
        }
        case DType::BF16: {
            auto* h = static_cast<uint16_t*>(row);
            for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_bf16(x[i]);
            return;
        }
        case DType::Q8_0: {
            STRATA_ASSERT(n % kQK == 0);
            auto* b = static_cast<BlockQ8_0*>(row);
            for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
                float amax = 0;
                for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
                const float d = amax / 127, id = d != 0 ? 1 / d : 0;
                b[i].d = fp32_to_fp16(d);
                for (int j = 0; j < kQK; ++j) b[i].qs[j] = static_cast<int8_t>(std::roundf(x[j] * id));
            }
            return;
        }
        case DType::Q4_0: {
            // ggml's quantize_row_q4_0_ref: the value of largest magnitude maps to -8. x * id + 8.5
            // is a multiply, then an add (this file is built without fused multiply-adds: the
            // GPU's KV store and gguf-py round it so).
            STRATA_ASSERT(n % kQK == 0);
            auto* b = static_cast<BlockQ4_0*>(row);
            for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
                float amax = 0, max = 0;
                for (int j = 0; j < kQK; ++j)
                    if (amax < std::fabs(x[j])) amax = std::fabs(x[j]), max = x[j];
                const float d = max / -8, id = d != 0 ? 1 / d : 0;
                b[i].d = fp32_to_fp16(d);
                for (int j = 0; j < kQK / 2; ++j) {
                    const auto lo = static_cast<uint8_t>(std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f))));
                    const auto hi =
                        static_cast<uint8_t>(std::min(15, static_cast<int>(static_cast<int8_t>(x[j + kQK / 2] * id + 8.5f))));
                    b[i].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
                }
            }
            return;
        }
        default: STRATA_ASSERT(is_kv_type(type));
    }
}

void load_kv_values(DType type, const void* row, int64_t i0, float* dst, int64_t n) {
    switch (type) {
        case DType::F32: std::memcpy(dst, static_cast<const float*>(row) + i0, n * sizeof(float)); return;
        case DType::F16:
            for (int64_t i = 0; i < n; ++i) dst[i] = half_to_float(static_cast<const f16_bits*>(row)[i0 + i]);
            return;
        case DType::BF16:
            for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(static_cast<const uint16_t*>(row)[i0 + i]);
            return;
        case DType::Q8_0: {
            const auto* b = static_cast<const BlockQ8_0*>(row);
            for (int64_t i = i0; i < i0 + n;) {  // block by block, each scale converted once
                const BlockQ8_0& blk = b[i / kQK];
                const float d = half_to_float(blk.d);
                const int64_t j0 = i % kQK, len = std::min<int64_t>(kQK - j0, i0 + n - i);
                float* out = dst + (i - i0);
                for (int64_t j = 0; j < len; ++j) out[j] = d * static_cast<float>(blk.qs[j0 + j]);
                i += len;
            }
            return;
        }
        case DType::Q4_0: {
            const auto* b = static_cast<const BlockQ4_0*>(row);
            for (int64_t i = i0; i < i0 + n; ++i) {
                const BlockQ4_0& blk = b[i / kQK];
                const int64_t j = i % kQK;
                const int q = j < kQK / 2 ? blk.qs[j] & 0x0F : blk.qs[j - kQK / 2] >> 4;
                dst[i - i0] = half_to_float(blk.d) * static_cast<float>(q - 8);
            }
            return;
        }
        default: STRATA_ASSERT(is_kv_type(type));
    }
}

}  // namespace strata::cpu
