#pragma once
// Causal multi-head attention with grouped KV heads over a float32 KV cache: contiguous rows,
// or pages of block_size rows found through a block table (a paged KV cache), read in place.
#include <cstdint>

namespace strata::cpu {

struct AttentionArgs {
    const float* q = nullptr;   // n_tokens x (n_head * head_dim)
    const float* k = nullptr;   // KV cache rows: position-major, row stride kv_stride floats;
    const float* v = nullptr;   // paged: block 0's first row
    float* out = nullptr;       // n_tokens x (n_head * head_dim)
    int64_t n_tokens = 0;
    int64_t pos0 = 0;           // position of the first query token; token t sees keys 0..pos0+t
    int32_t n_head = 0;
    int32_t n_head_kv = 0;
    int32_t head_dim = 0;
    int64_t kv_stride = 0;      // floats between consecutive positions in k and v
    // Paged KV (optional): position p is row p % block_size of block block_table[p / block_size],
    // which starts block_table[...] * block_stride floats after k (v). block_size is a multiple
    // of 16 (the kernels' key tile never crosses a block).
    const int32_t* block_table = nullptr;
    int64_t block_size = 0;
    int64_t block_stride = 0;
};

// Parallel (cpu::parallel_for) over tiles of (KV head, up to 32 query rows: every query head
// that shares the KV head, for several tokens), so each K and V row is read once per tile.
// Per tile: scores for 16 keys at a time (K block transposed in L1, one broadcast FMA per 16
// products), an exact softmax per row, then P V with the V row loaded once for 6 query rows.
// AVX-512 when the active path has it and head_dim is a multiple of 16, else plain C++.
void attention(const AttentionArgs& a);

// One tile, for the kernels (attention_cpu.cpp, attention_avx512.cpp).
struct AttentionTile {
    const float* const* q;   // m query rows (head_dim values each), already scaled by 1/sqrt(d)
    float* const* out;       // m output rows
    const int64_t* n_kv;     // keys each row sees (a causal prefix), all <= n_kv_max
    int m = 0;
    int64_t n_kv_max = 0;
    const float* k = nullptr;  // this KV head's first key (of block 0); rows kv_stride floats apart
    const float* v = nullptr;
    int64_t kv_stride = 0;
    int32_t head_dim = 0;
    float* scores = nullptr;   // scratch: m x n_kv_max (+16) floats
    // Keys in pages (AttentionArgs): contiguous when blocks is null and block_size >= n_kv_max.
    const int32_t* blocks = nullptr;
    int64_t block_size = 0;  // a multiple of 16
    int64_t block_stride = 0;
    // Row j of k (or v, given as base).
    const float* row(const float* base, int64_t j) const {
        const int64_t b = j / block_size;
        return base + (blocks ? blocks[b] * block_stride : 0) + (j - b * block_size) * kv_stride;
    }
};
void attention_tile_ref(const AttentionTile& t);
void attention_tile_avx512(const AttentionTile& t);  // head_dim % 16 == 0

}  // namespace strata::cpu
