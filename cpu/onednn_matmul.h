#pragma once
// Prefill through oneDNN's bf16 matmul, which runs on AMX-BF16 tiles. On 2 Sapphire Rapids
// cores at 512 tokens (bench/kernel_bench.cpp, tinyllama-1.1b's large projections) this path,
// dequantization included, reaches 0.9-1.1 TFLOP/s against 0.5-0.6 for the AMX-INT8 kernels on
// block-quantized weights (gemm_amx.cpp, held back by their per-block float scaling) and 0.26
// for F16 weights; oneDNN alone on pre-reordered bf16 weights reaches 1.2-1.9.
//
// The weights stay in their GGUF type (or tiled): each task of the pool dequantizes its rows to bf16 (at
// most 4 MiB, per-thread scratch, reused; no second copy of the model is kept) and multiplies
// them with one sequential oneDNN matmul, so the dequantization costs one pass over the weights
// per prefill call, amortized over the tokens, and oneDNN starts no OpenMP threads that would
// compete with the pool's. Activations and weights are rounded to bf16 (8 significant bits)
// and products are summed in f32: results differ from the float reference by up to 2^-7 of
// sum(|w x|), more than the default two-level int8 activations (2^-16), which is why it is
// opt-in: --bf16-prefill (set_bf16_prefill(true)) or STRATA_BF16_PREFILL=1. (On SmolLM2 Q4_1: teacher-forced
// top-1 agreement with the reference 381 of 384 positions, against 384 by default and 375 with
// --int8-acts; perplexity unchanged to 4 digits.)
#include <cstdint>

#include "core/dtype.h"

namespace strata::cpu {

// Prefill of at least this many tokens goes to oneDNN when the path is on: below it the
// per-call dequantization of the weights costs more than the faster multiply saves.
inline constexpr int64_t kBf16PrefillMinTokens = 128;

// Switched on (set_bf16_prefill, else STRATA_BF16_PREFILL=1), oneDNN runs bf16 on AMX here
// (and STRATA_AMX=0 is not set), and the weight type has CPU kernels.
bool bf16_prefill_usable(DType wtype);
bool bf16_prefill_enabled();
void set_bf16_prefill(bool on);
// Whether oneDNN runs AMX here (and STRATA_AMX=0 is not set): without it the bf16 prefill is off.
bool onednn_has_amx();

// y (n_tokens x n_rows, row-major) = x W^T with W (n_rows rows of n_cols values in `wtype`,
// row_bytes(wtype, n_cols) apart; rewritten by tile_weights when `tiled`) and x (n_tokens x
// n_cols floats) rounded to bf16, on the current pool's threads (cpu::parallel_for). Throws
// BackendError when oneDNN refuses.
void bf16_matmul(DType wtype, const void* weights, bool tiled, int64_t n_rows, int64_t n_cols, const float* x,
                 int64_t n_tokens, float* y);

}  // namespace strata::cpu
