#pragma once
// Causal multi-head attention with grouped KV heads over a contiguous float32 KV cache.
#include <cstdint>

namespace strata::cpu {

struct AttentionArgs {
    const float* q = nullptr;   // n_tokens x (n_head * head_dim)
    const float* k = nullptr;   // KV cache rows: position-major, row stride kv_stride floats
    const float* v = nullptr;
    float* out = nullptr;       // n_tokens x (n_head * head_dim)
    int64_t n_tokens = 0;
    int64_t pos0 = 0;           // position of the first query token; token t sees keys 0..pos0+t
    int32_t n_head = 0;
    int32_t n_head_kv = 0;
    int32_t head_dim = 0;
    int64_t kv_stride = 0;      // floats between consecutive positions in k and v
};

// Parallel over (token, head) with oneTBB.
void attention(const AttentionArgs& a);

}  // namespace strata::cpu
