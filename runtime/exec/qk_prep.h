#pragma once
// What turns projected queries and keys into the ones attention reads, per architecture:
// biases (qwen2), an RMSNorm of each head (qwen3, gemma3: QK-norm) and RoPE with the layer's
// own base, scale and frequency factors (gemma's sliding-window layers, llama3, phi3's
// LongRoPE). Shared by the forward pass and the KV rebuild, so rebuilt keys match.
#include <cstdint>

#include "cpu/norm_rope_act.h"
#include "models/hparams.h"
#include "runtime/weights/model_weights.h"

namespace strata::runtime {

// Layer il's RoPE in a context of n_ctx positions (phi3 takes its long factors past its
// original context).
cpu::RopeParams layer_rope(const models::Hparams& hp, const ModelWeights& w, int il, int64_t n_ctx);

// One token's queries (n_head heads) or keys (n_head_kv heads), in place, at position pos.
void prepare_queries(const models::Hparams& hp, const LayerWeights& l, const cpu::RopeParams& rope, float* q, int64_t pos);
void prepare_keys(const models::Hparams& hp, const LayerWeights& l, const cpu::RopeParams& rope, float* k, int64_t pos);

}  // namespace strata::runtime
