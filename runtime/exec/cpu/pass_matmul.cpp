#include "runtime/exec/cpu/pass_matmul.h"

#include <algorithm>

#include "core/error.h"
#include "cpu/onednn_matmul.h"
#include "cpu/quant.h"
#include "runtime/exec/backend.h"

namespace strata::runtime {

// cpu::matmul gives a token row the same bits whatever the other rows of the call for
// block-quantized weights (int8 activations, integer dot products: tests/unit/runtime/exec/
// tests/unit/runtime/exec/cpu/test_cpu_backend.cpp); bf16 prompt matmuls (opt-in) would round a pass's decode rows with its
// prompt rows.
bool PassMatmul::batch_invariant(std::span<const cpu::MatmulOut> outs) {
    bool invariant = !cpu::bf16_prefill_enabled();
    for (const auto& o : outs) invariant &= cpu::act_format_for(o.wtype) == cpu::ActFormat::Q8x2;
    return invariant;
}

void PassMatmul::run(std::span<const cpu::MatmulOut> outs, int64_t n_cols, const float* x, int64_t n, int64_t n_long) const {
    STRATA_ASSERT(outs.size() <= kMaxOuts);
    // Rows a call may take and keep each row's bits: float weights' decode strategy's; block-
    // quantized weights' any number, but for AMX's prefill (a verified draft of 16 rows and more).
    const int64_t chunk = batch_invariant(outs) ? cpu::row_invariant_tokens() : Backend::kDecodeRows;
    if (n <= chunk) return cpu::matmul_many(outs, n_cols, x, n, int8_);
    // Rows [0, n_long) as a pass of their sequences alone runs them; the rest `chunk` at a time.
    cpu::MatmulOut part[kMaxOuts];
    auto run_rows = [&](int64_t r0, int64_t r1) {
        for (size_t i = 0; i < outs.size(); ++i) {
            part[i] = outs[i];
            part[i].y = outs[i].y + r0 * outs[i].n_rows;
        }
        cpu::matmul_many({part, outs.size()}, n_cols, x + r0 * n_cols, r1 - r0, int8_);
    };
    if (n_long > 0) run_rows(0, n_long);
    for (int64_t r = n_long; r < n; r += chunk) run_rows(r, std::min(n, r + chunk));
}

void PassMatmul::project(const WeightRef& w, const float* x, int64_t n, float* y, int64_t n_long) const {
    const cpu::MatmulOut out = matmul_out(w, y);
    run({&out, 1}, w.n_cols, x, n, n_long);
}

}  // namespace strata::runtime
