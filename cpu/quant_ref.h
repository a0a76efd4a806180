#pragma once
// GGUF/ggml block layouts, the plain scalar reference kernels, and the per-path kernel tables
// that quant.h dispatches through. Every fast kernel is tested against the functions here.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "runtime/core/dtype.h"

namespace strata::cpu {

// ---- block layouts (byte-exact with ggml-common.h; the static_asserts guard the sizes) ----
inline constexpr int kQK = 32;    // values per block of the 32-block types
inline constexpr int kQKK = 256;  // values per K-quant super-block
inline constexpr int kKScaleBytes = 12;

using f16_bits = uint16_t;  // IEEE half, stored as bits so the scalar path needs no F16C

struct BlockQ4_0 { f16_bits d; uint8_t qs[kQK / 2]; };                  // x = d * (q - 8)
struct BlockQ4_1 { f16_bits d, m; uint8_t qs[kQK / 2]; };               // x = d * q + m
struct BlockQ5_0 { f16_bits d; uint8_t qh[4]; uint8_t qs[kQK / 2]; };   // x = d * (q - 16)
struct BlockQ5_1 { f16_bits d, m; uint8_t qh[4]; uint8_t qs[kQK / 2]; };
struct BlockQ8_0 { f16_bits d; int8_t qs[kQK]; };                       // x = d * q
// K-quants: 8 sub-blocks of 32 (Q4_K/Q5_K: 6-bit scale and min each, packed in 12 bytes)
// or 16 of 16 (Q6_K: int8 scales).
struct BlockQ4_K { f16_bits d, dmin; uint8_t scales[kKScaleBytes]; uint8_t qs[kQKK / 2]; };
struct BlockQ5_K { f16_bits d, dmin; uint8_t scales[kKScaleBytes]; uint8_t qh[kQKK / 8]; uint8_t qs[kQKK / 2]; };
struct BlockQ6_K { uint8_t ql[kQKK / 2]; uint8_t qh[kQKK / 4]; int8_t scales[kQKK / 16]; f16_bits d; };
// Activation type for the K-quants: float scale, and sums of each 16 values so the kernels can
// apply the weights' per-sub-block minimum without touching the values again.
struct BlockQ8_K { float d; int8_t qs[kQKK]; int16_t bsums[kQKK / 16]; };

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292);

// ---- scalar conversions (bit manipulation: valid on any x86-64, and exact) ----
float fp16_to_fp32(f16_bits h);
f16_bits fp32_to_fp16(float f);  // round to nearest even, like F16C
inline float bf16_to_fp32(uint16_t h) {
    uint32_t u = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
uint16_t fp32_to_bf16(float f);  // round to nearest even; NaN stays a quiet NaN

// Q4_K / Q5_K: the 6-bit scale and min of sub-block j (0..7) from the packed 12 bytes.
inline void k4_scale_min(int j, const uint8_t* q, uint8_t& sc, uint8_t& m) {
    if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// ---- scalar reference ----
// n must be a multiple of the type's block size; types without a kernel throw BackendError.
void dequantize_row_ref(DType type, const void* src, float* dst, int64_t n);
// Activation types: F32 (copy), BF16, Q8_0, Q8_K. Scales are amax/127 and values are rounded to
// nearest even, so a SIMD quantizer can give the same bytes.
void quantize_row_ref(DType act_type, const float* x, void* dst, int64_t n);
// Dot of one weight row with one activation row in activation_type_for(weight_type).
// Integer sums per block, float across blocks, as ggml's generic kernels do.
float vec_dot_ref(DType weight_type, const void* weight_row, const void* acts, int64_t n);

// ---- kernel tables, one per path; a null entry falls back to the next slower path ----
inline constexpr int kMaxTokens = 4;  // activation rows one weight-row pass serves
// out[t] = dot(weight row, activation row t) for t < n_tok (1..kMaxTokens); activation rows
// lie act_stride bytes apart.
using VecDotFn = void (*)(const void* w, const void* acts, size_t act_stride, int n_tok, int64_t n, float* out);
using DequantizeFn = void (*)(const void* src, float* dst, int64_t n);
using QuantizeFn = void (*)(const float* x, void* dst, int64_t n);

struct QuantKernels {
    DequantizeFn dequantize = nullptr;  // for this type as stored
    VecDotFn vec_dot = nullptr;         // for this type as weights
    QuantizeFn quantize = nullptr;      // for this type as activations
};

QuantKernels ref_kernels(DType type);     // quant_ref.cpp: complete for every supported type
QuantKernels avx2_kernels(DType type);    // quant_avx2.cpp
QuantKernels avx512_kernels(DType type);  // quant_avx512.cpp; checks avx512bf16 itself

}  // namespace strata::cpu
