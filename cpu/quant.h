#pragma once
// Quantized dot products and dequantization for the CPU backend: the public entry points.
// Each call dispatches to the kernel set of active_path() (cpu_features.h): AVX-512 (VNNI),
// AVX2 or the scalar reference, which every fast kernel is tested against.
//
// Weights stay in their GGUF type. Activations are first converted once per row to
// activation_type_for(weight type) (int8 blocks with a scale, like ggml's vec_dot_type), then
// dotted with as many weight rows as needed.
#include <cstddef>
#include <cstdint>

#include "runtime/core/dtype.h"

namespace strata::cpu {

// Whether the CPU kernels handle `weight_type` (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
// Q4_K, Q5_K, Q6_K, Q8_K).
bool has_kernels(DType weight_type);

// Q8_0 for the 32-blocks, Q8_K for the K-quants, BF16 for BF16 (so the dot can use
// _mm512_dpbf16_ps), F32 for F32 and F16. The same on every path, so results do not depend on
// the CPU beyond float summation order. Throws BackendError for a type without kernels.
DType activation_type_for(DType weight_type);
// Bytes of one activation row of n values for weights of `weight_type`.
size_t activation_row_bytes(DType weight_type, int64_t n);

// x (n floats) -> dst (row_bytes(act_type, n) bytes). n must be a multiple of act_type's
// block size. Gives the same bytes on every path.
void quantize_activations(DType act_type, const float* x, void* dst, int64_t n);

// dot(weight row, activation row) over n values; acts are in activation_type_for(weight_type).
float vec_dot(DType weight_type, const void* weight_row, const void* acts, int64_t n);

// out[t] = dot(weight row, activation row t) for t < n_tok, activation rows act_stride bytes
// apart: the weight row is decoded once for all of them. Any n_tok >= 1.
void vec_dot_rows(DType weight_type, const void* weight_row, const void* acts, size_t act_stride, int n_tok,
                  int64_t n, float* out);

// src (row_bytes(type, n) bytes) -> dst (n floats).
void dequantize_row(DType type, const void* src, float* dst, int64_t n);

}  // namespace strata::cpu
