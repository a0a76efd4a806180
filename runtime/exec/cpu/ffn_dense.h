#pragma once
// A gated feed-forward over rows of a pass: down(act(x gate^T) * (x up^T)), act SiLU (SwiGLU:
// llama, qwen, phi3, every expert) or GELU (GeGLU: gemma). The dense layers, the shared
// experts and each routed expert run through it.
#include <cstdint>

#include "models/arch.h"
#include "runtime/exec/cpu/pass_matmul.h"
#include "runtime/weights/model_weights.h"

namespace strata::runtime {

struct GatedFfn {
    WeightRef gate, up, down;
};

// out (n x n_embd) = the FFN of x's n rows (the first n_long of long segments); gate_buf and
// up_buf hold n x gate.n_rows floats. Runs on the thread pool (call inside its arena).
void gated_ffn(const PassMatmul& mm, models::FfnAct act, const GatedFfn& w, const float* x, int64_t n, int64_t n_long,
               float* gate_buf, float* up_buf, float* out);

}  // namespace strata::runtime
