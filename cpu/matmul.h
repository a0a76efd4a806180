#pragma once
// y = x W^T for one weight matrix in its GGUF type: the CPU backend's matmul.
#include <cstdint>
#include <span>

#include "core/dtype.h"
#include "core/kernel_shapes.h"

namespace strata::cpu {

// Up to this many tokens a matmul takes the decode strategy (one pass over the weights, each
// token row with the bits it gets alone); more take the prefill strategy.
inline constexpr int64_t kDecodeTokens = kCpuGemvTokens;

// weights: n_rows rows (output features) of n_cols values each (input features), in `wtype`,
//          rows row_bytes(wtype, n_cols) apart; n_cols is a multiple of wtype's block size.
// x:       n_tokens x n_cols floats, row-major.
// y:       n_tokens x n_rows floats, row-major: y[t][r] = dot(W[r], x[t]).
// Each x row is converted once to act_format_for(wtype) (quant.h) into a per-thread buffer
// that is reused across calls. Rows are split across the threads of the current
// cpu::ThreadPool (thread_pool.h; oneTBB's when none is current) in multiples of 16, the SIMD
// kernels' row tile; the kernels pick the decode (<= kDecodeTokens: one pass over the weights) or
// prefill (packed tiles, AMX where available) strategy themselves. Throws BackendError for a
// type without CPU kernels.
// int8 = true (opt-in, never the default): block-quantized weights get single-level int8
// activations (ActFormat::Q8, llama.cpp's precision) instead of Q8x2: faster prefill, and on
// SmolLM2 no longer the float reference's tokens (quant_ref.h).
// With the bf16 prefill switched on (opt-in, onednn_matmul.h), kBf16PrefillMinTokens or more
// tokens go to oneDNN's bf16 matmul instead (tiled or not), whatever `int8` says.
// tiled: the weights were rewritten by tile_weights (quant.h).
void matmul(DType wtype, const void* weights, int64_t n_rows, int64_t n_cols, const float* x, int64_t n_tokens,
            float* y, bool int8 = false, bool tiled = false);

// The most tokens one matmul of block-quantized weights (Q8x2 activations) takes in which every
// token's row has the bits it gets alone: AMX's prefill (kAmxMinTokens tokens and more, where
// the CPU has it) sums a row's blocks in another order; without AMX, any number.
int64_t row_invariant_tokens();
// One output of matmul_many: y (n_tokens x n_rows) = x W^T.
struct MatmulOut {
    DType wtype = DType::F32;
    const void* weights = nullptr;
    int64_t n_rows = 0;
    float* y = nullptr;
    bool tiled = false;  // rewritten by tile_weights (quant.h)
};
// The same x times several weight matrices (q, k and v; gate and up): x is converted once per
// activation format and the row tasks of all of them share one parallel loop (one wake-up and
// one join instead of one per matrix, which matters for small decode matmuls).
void matmul_many(std::span<const MatmulOut> outs, int64_t n_cols, const float* x, int64_t n_tokens, bool int8 = false);

}  // namespace strata::cpu
