#pragma once
// A gated feed-forward over rows of a pass: down(act(x gate^T) * (x up^T)), act SiLU (SwiGLU:
// llama, qwen, phi3, every expert), GELU (GeGLU: gemma) or gpt-oss's clamped SwiGLU with biases. The dense layers, the shared
// experts and each routed expert run through it.
#include <cstdint>

#include "models/hparams.h"
#include "runtime/exec/cpu/pass_matmul.h"
#include "runtime/weights/model_weights.h"

namespace strata::runtime {

struct GatedFfn {
    WeightRef gate, up, down;
    // Each product's bias (gpt-oss's experts), or null.
    const float* gate_b = nullptr;
    const float* up_b = nullptr;
    const float* down_b = nullptr;
};

// out (n x n_embd) = the FFN of x's n rows (the first n_long of long segments), its activation
// hp's ffn_act (the clamped SwiGLU with hp's swiglu_alpha and swiglu_limit); gate_buf and
// up_buf hold n x gate.n_rows floats. Runs on the thread pool (call inside its arena).
void gated_ffn(const PassMatmul& mm, const models::Hparams& hp, const GatedFfn& w, const float* x, int64_t n,
               int64_t n_long, float* gate_buf, float* up_buf, float* out);

}  // namespace strata::runtime
