#pragma once
// GGUF/ggml block layouts, the plain scalar reference kernels, and the per-path kernel tables
// that quant.h dispatches through. Every fast kernel is tested against the functions here.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/dtype.h"

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
// ggml's activation type for the K-quants (float scale, 16-value sums); here only a weight type.
struct BlockQ8_K { float d; int8_t qs[kQKK]; int16_t bsums[kQKK / 16]; };
// The 2- and 3-bit K-quants: 16 groups of 16 values, each with its own scale.
//   Q2_K: x = d * sc * q - dmin * m, q 2 bits; scales[g] = sc | m << 4 of group g.
//   Q3_K: x = d * (sc - 32) * (q - 4), q 3 bits (2 in qs, the third in hmask); sc 6 bits,
//         packed in 12 bytes (quant_ref_low_bit.cpp).
struct BlockQ2_K { uint8_t scales[kQKK / 16]; uint8_t qs[kQKK / 4]; f16_bits d, dmin; };
struct BlockQ3_K { uint8_t hmask[kQKK / 8]; uint8_t qs[kQKK / 4]; uint8_t scales[kKScaleBytes]; f16_bits d; };
// The 4-bit codebook types: x = scale * kIq4Values[q]. IQ4_NL has Q4_0's layout (scale d);
// IQ4_XS 8 sub-blocks of 32, scale d * (ls - 32) with ls 6 bits: 4 in scales_l, 2 in scales_h.
struct BlockIQ4_NL { f16_bits d; uint8_t qs[kQK / 2]; };
struct BlockIQ4_XS { f16_bits d; uint16_t scales_h; uint8_t scales_l[kQKK / 64]; uint8_t qs[kQKK / 2]; };
inline constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
// MXFP4 (OCP microscaling, gpt-oss's experts): 32 4-bit e2m1 values sharing one e8m0 exponent e,
// laid out as IQ4_NL (low nibbles values 0-15, high nibbles 16-31). As ggml stores it, the
// codebook holds the e2m1 values doubled (integers) and the scale is halved: x = 2^(e-128) * v[q].
struct BlockMXFP4 { uint8_t e; uint8_t qs[kQK / 2]; };
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockIQ4_XS) == 136 && sizeof(BlockMXFP4) == 17);

// Byte offsets of the f16 scale fields (d, dmin, m) in one block of `type`, for the tests and
// benchmarks that write random blocks (a random f16 may be inf or NaN); n = 0 for types
// without them (float types; Q8_K's scale is an f32 at offset 0).
struct F16ScaleFields {
    int n = 0;
    size_t at[2] = {};
};
F16ScaleFields f16_scale_fields(DType type);

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
// An MXFP4 block's scale 2^(e - 128) (ggml's GGML_E8M0_TO_FP32_HALF): subnormal for e < 2.
inline float e8m0_to_fp32_half(uint8_t e) {
    const uint32_t u = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

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

// ---- activations ----
// Weights are never requantized; activations are converted once per matmul to the format of
// act_format_for(weight type):
//   F32   for F32, F16 and BF16 weights: the floats as they are (products exact in fp32).
//   Q8x2  for every block-quantized type: two int8 levels per value in blocks of 32,
//           d  = amax / 127,  hi = round(x / d)                      (plain Q8_0 rounding)
//           lo = round((x - d * hi) * 256 / d), clamped to [-127, 127] (the residual, 256x finer)
//           x ~= dc * c  with  c = 256 * hi + lo  and  dc = d / 256.
//         So the error is at most d/512 (about 2^-16 of the block's amax) instead of d/2: single-
//         level int8 activations (llama.cpp's Q8_0/Q8_K) moved SmolLM2's greedy continuation
//         after 4 tokens and its teacher-forced top-1 to 96.6%; with Q8x2 both match the float
//         reference (measured with a float-activation emulation: f32 384/384, Q8x2 384/384,
//         bf16 381/384, single int8 370/384 of the fixture's positions). The integer dot
//         products stay exact: the weight bytes are unpacked once and meet hi and lo in two
//         VNNI dot instructions, combined as (dot_hi << 8) + dot_lo.
//   Q8    opt-in (matmul's `int8`): the Q8x2 layout with lo = 0, i.e. single-level int8 like
//         llama.cpp's Q8_0 (c = 256 * hi). Kernels then skip the lo dot products: 1.25-1.6x faster
//         prefill, no faster decode (memory-bound); see BENCHMARKS.md. Never the default.
enum class ActFormat : uint8_t { F32, Q8x2, Q8 };

inline constexpr int kActBlock = 32;
// A Q8x2 row of n values (n a multiple of 32, nb = n / 32 blocks):
//   hi[n] int8 | lo[n] int8 | dc[nb] f32 | dcs[nb] f32 | s32[nb] int32 | s16[2 nb] int32
// dcs = dc * s32, s32 = sum of c over a block of 32, s16 = sum of c over each 16 values: the
// kernels apply weight offsets and minimums through them without touching the values again.
struct ActQ8x2 {
    int8_t* hi;
    int8_t* lo;
    float* dc;
    float* dcs;
    int32_t* s32;
    int32_t* s16;
};
// The scales and sums of block b once its hi/lo values are written (every quantizer path
// finishes a block the same way, so their outputs stay bit-identical).
inline void finish_q8x2_block(const ActQ8x2& v, int64_t b, float d, const int32_t s16[2]) {
    v.dc[b] = d * 0x1p-8f;
    v.s32[b] = s16[0] + s16[1];
    v.dcs[b] = v.dc[b] * static_cast<float>(v.s32[b]);
    v.s16[2 * b] = s16[0];
    v.s16[2 * b + 1] = s16[1];
}
inline size_t act_q8x2_bytes(int64_t n) {
    const size_t raw = static_cast<size_t>(n) * 2 + static_cast<size_t>(n / kActBlock) * 20;
    return (raw + 63) & ~size_t{63};  // rows 64-byte aligned in a batch
}
inline ActQ8x2 act_q8x2(void* row, int64_t n) {
    auto* p = static_cast<uint8_t*>(row);
    const int64_t nb = n / kActBlock;
    ActQ8x2 v;
    v.hi = reinterpret_cast<int8_t*>(p);
    v.lo = reinterpret_cast<int8_t*>(p + n);
    v.dc = reinterpret_cast<float*>(p + 2 * n);
    v.dcs = v.dc + nb;
    v.s32 = reinterpret_cast<int32_t*>(v.dcs + nb);
    v.s16 = v.s32 + nb;
    return v;
}
inline ActQ8x2 act_q8x2(const void* row, int64_t n) { return act_q8x2(const_cast<void*>(row), n); }
// c = 256 * hi + lo of activation value i.
inline int32_t act_c(const ActQ8x2& v, int64_t i) { return 256 * int32_t(v.hi[i]) + int32_t(v.lo[i]); }

// ---- scalar reference ----
// n must be a multiple of the type's block size; types without a kernel throw BackendError.
void dequantize_row_ref(DType type, const void* src, float* dst, int64_t n);
// x (n floats) -> one activation row in `fmt` (F32: a copy). Every path gives the same bytes:
// same operations (an amax, one IEEE divide for d and one for 1/d, multiplies, one fused
// multiply-add for the residual, round half to even).
void quantize_act_ref(ActFormat fmt, const float* x, void* dst, int64_t n);
// Values of an activation row, back to floats (dc * c for Q8x2).
void dequantize_act_ref(ActFormat fmt, const void* src, float* dst, int64_t n);
// Dot of one weight row with one activation row in act_format_for(weight_type). Per block an
// exact integer dot, then float: (weight scale * dc) * float(int dot) [+ weight min * dcs];
// blocks are summed in order. The SIMD paths compute the same integers and differ only in the
// order of the float additions.
float vec_dot_ref(DType weight_type, const void* weight_row, const void* act_row, int64_t n);

// ---- kernel tables, one per path; a null entry falls back to the next slower path ----
// One matmul of a weight matrix with a batch of activation rows.
struct MatmulJob {
    const uint8_t* w = nullptr;  // weight rows in their GGUF type
    size_t w_stride = 0;         // bytes between weight rows
    bool w_tiled = false;        // full 16-row tiles rewritten by tile_weights (quant.h)
    int64_t n_rows = 0;          // weight rows (output features)
    int64_t n_cols = 0;          // values per row (input features)
    const uint8_t* acts = nullptr;  // activation rows in act_format_for(weight type)
    size_t a_stride = 0;
    int64_t n_tok = 0;
    float* y = nullptr;  // y[t * ldy + r] = dot(weight row r, activation row t)
    int64_t ldy = 0;
    bool skip_lo = false;  // activations are ActFormat::Q8 (lo all zero): kernels may skip it
    // F32 activations only, when the driver made it (more than 4 tokens): the same values in
    // groups of 16 tokens, xt[(g * n_cols + k) * 16 + t] = x[16 g + t][k] (zeros past n_tok), so
    // a kernel reads the 16 tokens of a column from one cache line.
    const float* xt = nullptr;
};
// Computes rows [r0, r1) of the job for every token. The driver (matmul.cpp) hands each
// thread row ranges that start on a multiple of kRowTile.
inline constexpr int64_t kRowTile = 16;
using MatmulRowsFn = void (*)(const MatmulJob& job, int64_t r0, int64_t r1);
using DequantizeFn = void (*)(const void* src, float* dst, int64_t n);
using QuantizeActFn = void (*)(const float* x, void* dst, int64_t n);

struct QuantKernels {
    DequantizeFn dequantize = nullptr;  // for this type as stored
    MatmulRowsFn matmul_rows = nullptr; // for this type as weights
};
struct ActKernels {
    QuantizeActFn quantize = nullptr;
};

QuantKernels ref_kernels(DType type);     // quant_ref.cpp: complete for every supported type
QuantKernels avx2_kernels(DType type);    // quant_avx2.cpp
QuantKernels avx512_kernels(DType type);  // quant_avx512.cpp, gemm_avx512.cpp
ActKernels ref_act_kernels(ActFormat fmt);
ActKernels avx2_act_kernels(ActFormat fmt);
ActKernels avx512_act_kernels(ActFormat fmt);

}  // namespace strata::cpu
