#pragma once
// y = x W^T for one weight matrix in its GGUF type: the CPU backend's matmul.
#include <cstdint>

#include "runtime/core/dtype.h"

namespace strata::cpu {

// weights: n_rows rows (output features) of n_cols values each (input features), in `wtype`,
//          rows row_bytes(wtype, n_cols) apart; n_cols is a multiple of wtype's block size.
// x:       n_tokens x n_cols floats, row-major.
// y:       n_tokens x n_rows floats, row-major: y[t][r] = dot(W[r], x[t]).
// Each x row is quantized once to activation_type_for(wtype). Rows are split across the threads
// of the caller's tbb::task_arena; each weight row is read once per group of up to
// kMaxTokens (quant_ref.h) tokens, and a tile of rows stays in cache across the groups.
// Throws BackendError for a type without CPU kernels.
void matmul(DType wtype, const void* weights, int64_t n_rows, int64_t n_cols, const float* x, int64_t n_tokens,
            float* y);

}  // namespace strata::cpu
