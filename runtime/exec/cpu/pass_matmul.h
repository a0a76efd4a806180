#pragma once
// y = x W^T over rows of a CPU pass, as a pass of each row's sequence alone would compute it
// (runtime/exec/cpu/cpu_backend.h): block-quantized weights give a row the same bits in any batch
// up to cpu::row_invariant_tokens() rows (AMX's prefill sums in another order); float weights
// round differently in cpu::matmul's decode (<= kDecodeRows rows) and prefill strategies. So
// the rows of short segments run that many at a time and those of long segments (which come
// first) together.
#include <cstdint>
#include <span>

#include "cpu/matmul.h"
#include "runtime/weights/model_weights.h"

namespace strata::runtime {

class PassMatmul {
public:
    // Opt-in (EngineOptions::int8_activations): single-level int8 activations, cpu::matmul's `int8`.
    void set_int8_activations(bool on) { int8_ = on; }
    bool int8_activations() const { return int8_; }

    // Every output of `outs` (at most kMaxOuts) from the same n rows of x (n_cols each), of
    // which the first n_long belong to segments of more than kDecodeRows tokens.
    void run(std::span<const cpu::MatmulOut> outs, int64_t n_cols, const float* x, int64_t n, int64_t n_long) const;
    void project(const WeightRef& w, const float* x, int64_t n, float* y, int64_t n_long) const;
    // Whether every output's rows have the same bits in any batch (one call may take them all).
    static bool batch_invariant(std::span<const cpu::MatmulOut> outs);

    static constexpr size_t kMaxOuts = 8;

private:
    bool int8_ = false;
};

}  // namespace strata::runtime
