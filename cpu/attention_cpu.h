#pragma once
// Causal multi-head attention with grouped KV heads over a KV cache whose rows are float32,
// float16, bfloat16, Q8_0 or Q4_0 (ggml's blocks of 32 values and one f16 scale): contiguous
// rows, or pages of block_size rows found through a block table (a paged KV cache), read in
// place and converted to float as the kernels go, never copied out whole.
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/dtype.h"

namespace strata::cpu {

// Query rows that are the nodes of a draft tree (speculative decoding): token t writes its key
// at slot[t] (its keys end there) and sees every key before `base` and, from `base` on, those
// whose bit is set in its row of `mask` (bit i of mask[t * words + i / 64]: key base + i), its
// ancestors' and its own. Its position (RoPE, a window's start) is pos[t]; the node whose key is
// at slot base + i stands at key_pos[i]. Keys it does not see weigh exactly 0 and are skipped
// where a sum would meet them, and sums in lanes take a tree's keys at their positions, so a
// node whose ancestors sit at slots in position order gets the bits of the chain of its
// ancestors (its branch decoded one token at a time).
struct AttentionTree {
    int64_t base = 0;
    const int64_t* slot = nullptr;
    const int64_t* pos = nullptr;
    const int64_t* key_pos = nullptr;
    const uint64_t* mask = nullptr;
    int32_t words = 0;

    // Whether token t sees key j in a window that starts at position `first`.
    bool sees(int64_t t, int64_t j, int64_t first) const {
        if (j < base) return true;
        const int64_t i = j - base;
        return i < int64_t(words) * 64 && (mask[t * words + i / 64] >> (i % 64) & 1) != 0 && key_pos[i] >= first;
    }
};

// Decode rows past kAttentionSplitKeys keys are split over their keys; prompt rows never are.
// ByCount: the rows of a pass of fewer than kAttentionSplitTokens tokens are decode rows.
// Decode: generated tokens' (a decode step's, a verify pass's drafts), however many; Prompt: a
// prompt's, however few (a cached prefix's remainder gets the bits the whole prompt's pass gives).
enum class AttentionRows { ByCount, Decode, Prompt };

struct AttentionArgs {
    const float* q = nullptr;   // n_tokens x (n_head * head_dim)
    const void* k = nullptr;    // KV cache rows of kv_type: position-major, kv_stride bytes apart;
    const void* v = nullptr;    // paged: block 0's first row
    float* out = nullptr;       // n_tokens x (n_head * v_dim())
    int64_t n_tokens = 0;
    int64_t pos0 = 0;           // position of the first query token; token t sees keys 0..pos0+t
    int32_t n_head = 0;
    int32_t n_head_kv = 0;
    int32_t head_dim = 0;
    int64_t kv_stride = 0;      // bytes between consecutive positions in k and v
    DType kv_type = DType::F32; // is_kv_type; a row holds n_head_kv * head_dim values
    // Paged KV (optional): position p is row p % block_size of block block_table[p / block_size],
    // which starts block_table[...] * block_stride bytes after k (v). block_size is a multiple
    // of 16 (the kernels' key tile never crosses a block).
    const int32_t* block_table = nullptr;
    int64_t block_size = 0;
    int64_t block_stride = 0;
    // Variants (gemma): a sliding window (token at position p sees keys p - window + 1 .. p;
    // 0: every earlier key), the score scale (0: 1/sqrt(head_dim)) and a soft cap of the
    // scaled scores, s -> softcap * tanh(s / softcap) (0: none).
    int64_t window = 0;
    float scale = 0.0f;
    float softcap = 0.0f;
    // Attention sinks (gpt-oss): n_head logits, head h's joining its softmax's denominator as one
    // more score (unscaled, seeing no value); null: none.
    const float* sinks = nullptr;
    // Value heads narrower than key heads (0: head_dim): head h's values are v_head_dim values
    // from column (h's KV head) * v_head_dim of a V row, V rows kv_stride bytes apart like K's.
    // MLA's absorbed attention: one KV head whose K row is the latent (kv_lora_rank values) then
    // its RoPE part, V the latent alone (v = k, v_head_dim = kv_lora_rank).
    int32_t v_head_dim = 0;
    // The query tokens are a draft tree's nodes (pos0 unused); null: causal rows.
    const AttentionTree* tree = nullptr;
    // Which rows these are, for how they are cut (attention below).
    AttentionRows rows = AttentionRows::ByCount;

    int32_t v_dim() const { return v_head_dim > 0 ? v_head_dim : head_dim; }
};

// Parallel (cpu::parallel_for) over tiles of (KV head, up to 32 query rows: every query head
// that shares the KV head, for several tokens), so each K and V row is read once per tile.
// Decode rows (AttentionRows) that see more than kAttentionSplitKeys keys are split over parts of
// that many keys, a task each, merged by log-sum-exp: equal to the unsplit rows within float
// rounding, and the same whatever the batch or the threads (rows on both sides of the first
// part's edge are cut apart). A draft tree's rows split so too where no part boundary falls
// inside the tree (its slots and the chains its nodes stand for lie in one part).
// Per tile: scores for 16 keys at a time (K block converted to float and transposed in L1, one
// broadcast FMA per 16 products), an exact softmax per row, then P V with the V row loaded once
// for several query rows. AVX-512 when the active path has it and head_dim and the value width
// are multiples of 16 (head_dim at most 1024), else plain C++. Throws UsageError for a kv_type
// that is not a KV cache type or value heads wider than key heads.
void attention(const AttentionArgs& a);
// Several independent attentions (a batch's sequences) as one parallel loop over all their tiles.
void attention_batch(std::span<const AttentionArgs> batch);

// The widest key head the AVX-512 tile takes (MLA's absorbed heads are 576 values), and the
// widest it scores directly (AttentionTile::direct_scores).
inline constexpr int32_t kMaxSimdHeadDim = 1024;
inline constexpr int32_t kMaxDirectHeadDim = 256;

// One tile, for the kernels (attention_cpu.cpp, attention_avx512.cpp).
struct AttentionTile {
    const float* const* q;   // m query rows (head_dim values each), already scaled by 1/sqrt(d)
    float* const* out;       // m output rows
    const int64_t* n_kv;     // keys each row sees end there (causal), all <= n_kv_max
    const int64_t* kv_first; // and start there (a sliding window; 0 without), all >= j_begin
    int m = 0;
    int64_t n_kv_max = 0;
    const std::byte* k = nullptr;  // block 0's first key row; rows kv_stride bytes apart
    const std::byte* v = nullptr;
    int64_t col0 = 0;        // this KV head's first value in a K row
    int64_t v_col0 = 0;      // and in a V row
    int64_t kv_stride = 0;
    DType kv_type = DType::F32;
    int32_t head_dim = 0;    // values of a query and key row
    int32_t v_dim = 0;       // of a value and output row
    float* scores = nullptr;   // scratch: m x n_kv_max (+16) floats
    int64_t j_begin = 0;       // the first key any row sees, rounded down to a multiple of 16
    float softcap = 0.0f;      // AttentionArgs::softcap
    const float* sinks = nullptr;  // m sink logits (AttentionArgs::sinks of each row's head), or null
    // Keys in pages (AttentionArgs): contiguous when blocks is null and block_size >= n_kv_max.
    const int32_t* blocks = nullptr;
    int64_t block_size = 0;  // a multiple of 16
    int64_t block_stride = 0;
    // Draft-tree rows (AttentionTree): row m is token tokens[m] of the tree; null: causal rows.
    const AttentionTree* tree = nullptr;
    const int64_t* tokens = nullptr;
    // A part of each row's keys (a split decode row): each output row is normalised by its own
    // sum and followed by two floats, the row's largest score and its sum of exponentials (0:
    // it saw no key), which attention() merges by log-sum-exp; sinks are left to the merge.
    bool partial = false;
    // Scores as one dot product a key row and query row, their 16-lane partial sums added across
    // the lanes, instead of from transposed key blocks: fewer instructions for the few rows of
    // a decode token's query heads. Rounds otherwise than the transposed path, so a call sets
    // it by the kind of its rows (split decode rows), never by how many share the tile.
    bool direct_scores = false;
    bool sees(int m, int64_t j) const { return j >= kv_first[m] && j < n_kv[m] && (!tree || tree->sees(tokens[m], j, kv_first[m])); }
    // Of keys [j, j + 16), those row m's tree mask lets it see (all without a tree).
    uint32_t tree_lanes(int m, int64_t j) const {
        if (!tree || j + 16 <= tree->base) return 0xFFFFu;
        uint32_t k = 0;
        for (int i = 0; i < 16; ++i) k |= uint32_t(tree->sees(tokens[m], j + i, kv_first[m])) << i;
        return k;
    }
    // Row j of k (or v, given as base).
    const std::byte* row(const std::byte* base, int64_t j) const {
        const int64_t b = j / block_size;
        return base + (blocks ? blocks[b] * block_stride : 0) + (j - b * block_size) * kv_stride;
    }
};
void attention_tile_ref(const AttentionTile& t);
void attention_tile_avx2(const AttentionTile& t);  // the reference's loop, 8 lanes wide (also for the shapes the AVX-512 tile does not take)
void attention_tile_avx512(const AttentionTile& t);  // head_dim, v_dim % 16 == 0; head_dim <= kMaxSimdHeadDim
// s[j] = cap * tanh(s[j] / cap) for n scores (both kernels).
void softcap_scores(float* s, int64_t n, float cap);

}  // namespace strata::cpu
