#pragma once
// Quantized weights on the CPU: the public entry points. Each call dispatches to the kernel set
// of active_path() (cpu_features.h): AVX-512 (VNNI, AMX for prefill where the CPU has it), AVX2
// or the scalar reference in quant_ref.cpp, which every fast kernel is tested against.
//
// Weights stay in their GGUF type. Activations are converted once per matmul to
// act_format_for(weight type) (quant_ref.h: fp32, or two-level int8 "Q8x2" whose error is
// about 2^-16 of a block's largest value), then dotted with the weight rows.
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "cpu/quant_ref.h"

namespace strata::cpu {

// Whether the CPU kernels handle `weight_type` (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ4_NL, IQ4_XS, MXFP4: the types core/dtype marks computable).
bool has_kernels(DType weight_type);

// F32 for float weights (F32, F16, BF16), Q8x2 for the block-quantized types; the same on
// every path, so results do not depend on the CPU beyond float summation order. Throws
// BackendError for a type without kernels.
ActFormat act_format_for(DType weight_type);
// Bytes of one activation row of n values for weights of `weight_type` (a multiple of 64 for
// Q8x2, so rows of a batch stay aligned).
size_t act_row_bytes(DType weight_type, int64_t n);

// x (n floats) -> one activation row. n must be a multiple of 32 for Q8x2. Gives the same
// bytes on every path.
void quantize_activations(ActFormat fmt, const float* x, void* dst, int64_t n);

// Rows [r0, r1) of a matmul job (quant_ref.h) on the active path.
void matmul_rows(DType weight_type, const MatmulJob& job, int64_t r0, int64_t r1);

// Rewrites the full 16-row tiles of a weight matrix (n_rows x n_cols in `weight_type`) in place
// into the order the AVX-512 kernels load them, so that decode streams each tile linearly
// instead of transposing 16 rows per block; a partial last tile stays as it is. Results do not
// change: the kernels pack the same values. Returns false, changing nothing, where the active
// path is not AVX-512 or the type has no such layout (float types). Tiled weights go to
// matmul_rows with MatmulJob::w_tiled (cpu::matmul: MatmulOut::tiled), on the AVX-512 path only.
bool tile_weights(DType weight_type, void* weights, int64_t n_rows, int64_t n_cols);

// The file's layout of n_rows x n_cols weights rewritten by tile_weights, into dst (the same
// bytes as before tile_weights): for a device that reads the file's layout from what the CPU
// keeps tiled (op offload). Returns false, writing nothing, where the active path has no tiled
// layout for the type (then nothing was tiled) or its layout keeps only what the kernels read
// (Q8_K, without its block sums).
bool untile_weights(DType weight_type, const void* tiled, void* dst, int64_t n_rows, int64_t n_cols);
// Whether weights of `weight_type`, rows of n_cols, come back in the file's layout from what the
// active path holds of them: tiled and given back by untile_weights, or never tiled (no tiled
// layout for the type here). False for Q8_K on the AVX-512 path.
bool can_untile(DType weight_type, int64_t n_cols);

// Rows [row0, row0 + n) of n_rows x n_cols weights rewritten by tile_weights, into dst (n rows
// of n_cols floats) as dequantize_row gives them from the file's layout: embeddings tied to a
// tiled output head, the bf16 prefill's weights. Throws BackendError off the AVX-512 path.
void dequantize_tiled_rows(DType weight_type, const void* weights, int64_t n_rows, int64_t n_cols, int64_t row0,
                           int64_t n, float* dst);

// dot(weight row, activation row) over n values on the active path (tests; matmul uses
// matmul_rows).
float vec_dot(DType weight_type, const void* weight_row, const void* act_row, int64_t n);

// src (row_bytes(type, n) bytes) -> dst (n floats).
void dequantize_row(DType type, const void* src, float* dst, int64_t n);

}  // namespace strata::cpu
