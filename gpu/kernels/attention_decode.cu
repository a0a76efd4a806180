// Attention of query rows over a paged KV cache, flash-decoding style: the keys are split into
// runs of 1 to 8 KV blocks (decode_splits.h: 128 keys at depth, shorter runs for a shallow row, so
// that it still spreads over the device); one thread block takes one split for every query head that
// shares a KV head (grouped-query attention reads each key and value once for the group), and
// writes each head's unnormalised partial output with its running max and sum; a second
// kernel rescales and combines the splits. Keys are read eight values at a time (16-byte loads
// where the cache's type allows), each by a group of lanes that split the head between them.
// Same maths as cpu::attention (scale, soft cap, sliding window, sinks and value heads narrower
// than key heads included: MLA's latent, whose values are the first v_head_dim of a key row),
// draft trees' rows too: a tree row's keys are its ancestors' and its own, read by position
// (tree_keys.h) as plain decoding at its position reads them, so it gets the same bits.
#include <algorithm>
#include <cmath>

#include "gpu/cuda_check.h"
#include "gpu/cuda_kernels.h"
#include "gpu/kernels/attention_common.cuh"
#include "gpu/kernels/decode_splits.h"
#include "gpu/kernels/tree_keys.h"

namespace strata::gpu {
namespace {

using blocks::KvElem;
using blocks::KvKind;

constexpr int kThreads = 128;
constexpr int kSplitKeys = blocks::kDecodeSplitMaxKeys;  // a split's keys at most
constexpr int kMaxGroup = 16;  // query heads one thread block handles; larger groups take several
constexpr int kValueBatch = 16;  // value rows whose reads a thread has in flight at once
constexpr int kScoreKeys = 2;   // keys whose reads a lane group has in flight at once

// The keys `row` attends to, by position: every position up to its own (a draft tree's row stands
// at its position, not at its last key's slot).
__device__ __forceinline__ int64_t key_positions(const DecodeAttentionArgs& a, int64_t row) {
    return a.pos ? int64_t(a.pos[row]) + 1 : int64_t(a.n_kv[row]);
}
// The cache slot of `row`'s key at position j (DecodeAttentionArgs::tree_mask): its own outside a
// draft tree, the k-th ancestor's (or its own) at the tree's k-th position.
__device__ __forceinline__ int64_t key_slot(const DecodeAttentionArgs& a, int64_t row, int64_t j) {
    if (!a.tree_mask) return j;
    return blocks::tree_key_slot(a.tree_mask + row * a.tree_words, a.tree_words, a.tree_base[row], j);
}

// Row `slot` of a launch (its rows from row0 on, at most attention_rows_per_launch of them).
__device__ __forceinline__ float* partial_at(const DecodeAttentionArgs& a, int n_splits, int64_t slot, int head, int split) {
    return a.scratch + ((slot * a.n_head + head) * n_splits + split) * (a.head_dim + 2);
}

// grid = (n_splits, n_head_kv x head passes, rows), 128 threads. Dynamic shared memory: the
// pass's scaled queries (group x head_dim floats), then their scores (group x 128).
template <KvKind kKind, bool kEight>
__global__ void __launch_bounds__(kThreads) decode_split_kernel(DecodeAttentionArgs a, int64_t row0, int n_splits,
                                                                int passes, float scale) {
    extern __shared__ float smem[];
    using E = KvElem<kKind>;
    const int split = blockIdx.x, hk = blockIdx.y / passes, pass = blockIdx.y % passes;
    const int64_t row = row0 + blockIdx.z;
    const int group = a.n_head / a.n_head_kv;
    const int h0 = hk * group + pass * kMaxGroup;
    const int heads = min(kMaxGroup, group - pass * kMaxGroup);
    const int hd = a.head_dim, vd = value_dim(a);
    float* q = smem;
    float* p = smem + heads * hd;

    const int64_t n_keys = key_positions(a, row);
    const int split_keys = blocks::decode_split_keys(n_keys);
    const int64_t j0 = int64_t(split) * split_keys;
    const int n = static_cast<int>(min(n_keys - j0, int64_t(split_keys)));  // keys of this split (may be <= 0)
    const int64_t first_key = a.window > 0 ? max(int64_t(0), n_keys - a.window) : 0;
    if (n <= 0) return;  // past the sequence's end: not live, the reduce reads nothing of it
    if (j0 + n <= first_key) {  // before the window
        for (int g = 0; g < heads; ++g) {
            float* part = partial_at(a, n_splits, blockIdx.z, h0 + g, split);
            for (int d = threadIdx.x; d < hd; d += kThreads) part[d] = 0.0f;
            if (threadIdx.x == 0) part[hd] = -INFINITY, part[hd + 1] = 0.0f;
        }
        return;
    }
    for (int i = threadIdx.x; i < heads * hd; i += kThreads) q[i] = a.q[(row * a.n_head + h0) * hd + i] * scale;
    // Each key's row in the cache, found once for the scores and the values alike (its block
    // table entry read, a draft tree row's mask walked): found where it was read, the table's
    // load waited out a round trip to memory before every batch of keys' and values' own.
    __shared__ int64_t key_row[kSplitKeys];
    const int32_t* table = a.block_tables + row * a.max_blocks;
    for (int jj = threadIdx.x; jj < n; jj += kThreads) {
        if (j0 + jj < first_key) continue;  // before the window: not read
        key_row[jj] = kv_row_offset(table, key_slot(a, row, j0 + jj), a.row_stride, a.block_stride);
    }
    __syncthreads();

    const int64_t head_at = int64_t(hk) * hd;  // the KV head's first value in a row
    // Scores: `lanes` lanes per key split the head eight values each; each lane group takes
    // kScoreKeys keys a pass and reads them all before using any, so that the reads overlap.
    const int lanes = attention_key_lanes(hd), per_pass = kThreads / lanes;
    const int lane_in_key = threadIdx.x % lanes;
    for (int jb = 0; jb < n; jb += kScoreKeys * per_pass) {  // uniform over the block: every lane shuffles
        int jj[kScoreKeys];
        bool valid[kScoreKeys];
        const uint8_t* k[kScoreKeys];
        float acc[kScoreKeys][kMaxGroup];
#pragma unroll
        for (int b = 0; b < kScoreKeys; ++b) {
            jj[b] = jb + b * per_pass + int(threadIdx.x) / lanes;
            valid[b] = jj[b] < n && j0 + jj[b] >= first_key;  // a key before the window is not read
            k[b] = valid[b] ? static_cast<const uint8_t*>(a.k) + key_row[jj[b]] : nullptr;
#pragma unroll
            for (int g = 0; g < kMaxGroup; ++g) acc[b][g] = 0.0f;
        }
        for (int d = 8 * lane_in_key; d < hd; d += 8 * lanes) {
            float kv[kScoreKeys][8];
#pragma unroll
            for (int b = 0; b < kScoreKeys; ++b) {
                if (!valid[b]) continue;
                if constexpr (kEight) {
                    E::eight(k[b], head_at + d, kv[b]);
                } else {
                    for (int i = 0; i < 8; ++i) kv[b][i] = d + i < hd ? E::one(k[b], head_at + d + i) : 0.0f;
                }
            }
#pragma unroll
            for (int b = 0; b < kScoreKeys; ++b) {
                if (!valid[b]) continue;
#pragma unroll
                for (int g = 0; g < kMaxGroup; ++g)
                    if (g < heads)
#pragma unroll
                        for (int i = 0; i < 8; ++i)
                            if (kEight || d + i < hd) acc[b][g] += q[g * hd + d + i] * kv[b][i];
            }
        }
#pragma unroll
        for (int b = 0; b < kScoreKeys; ++b)
#pragma unroll
            for (int g = 0; g < kMaxGroup; ++g) {
                if (g >= heads) break;
                const float s = group_sum(acc[b][g], lanes);
                if (jj[b] < n && lane_in_key == 0)
                    p[g * kSplitKeys + jj[b]] = valid[b] ? capped(s, a.softcap) : -INFINITY;
            }
    }
    __syncthreads();
    // Softmax numerators per head: warp w takes heads w, w + 4, ...
    __shared__ float head_max[kMaxGroup], head_sum[kMaxGroup];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int g = warp; g < heads; g += kThreads / 32) {
        float* ps = p + g * kSplitKeys;
        float mx = -INFINITY;
        for (int jj = lane; jj < n; jj += 32) mx = fmaxf(mx, ps[jj]);
        mx = warp_max(mx);
        float sum = 0.0f;
        for (int jj = lane; jj < n; jj += 32) {
            const float e = mx == -INFINITY ? 0.0f : expf(ps[jj] - mx);
            ps[jj] = e;
            sum += e;
        }
        sum = warp_sum(sum);
        if (lane == 0) head_max[g] = mx, head_sum[g] = sum;
    }
    __syncthreads();
    // Partial outputs: thread d accumulates column d over the split's value rows for every head,
    // in key order. A batch of kValueBatch rows' values is read before any is weighed, so that
    // the reads are in flight together: read one at a time, each waits out the memory's latency,
    // and a split's 128 keys cost about as much at any depth (the H200's probe: 142 us a layer
    // at 512 positions, 150 at 4096; 8 rows at once, 106 and 118; 16 at once with every key's row
    // found before, 62 and 72).
    const int64_t value_at = int64_t(hk) * vd;
    for (int d = threadIdx.x; d < vd; d += kThreads) {
        float o[kMaxGroup];
#pragma unroll
        for (int g = 0; g < kMaxGroup; ++g) o[g] = 0.0f;
        for (int jb = 0; jb < n; jb += kValueBatch) {
            float v[kValueBatch];
#pragma unroll
            for (int u = 0; u < kValueBatch; ++u) {
                const int jj = jb + u;
                // A key before the window weighs 0 and is not read (uniform over the block).
                const bool read = jj < n && j0 + jj >= first_key;
                v[u] = read ? E::one(static_cast<const uint8_t*>(a.v) + key_row[jj], value_at + d) : 0.0f;
            }
#pragma unroll
            for (int u = 0; u < kValueBatch; ++u) {
                if (jb + u >= n) break;
                // A key before the window has numerator 0 (its score -inf): adding 0 * 0 leaves o as skipping it did.
#pragma unroll
                for (int g = 0; g < kMaxGroup; ++g)
                    if (g < heads) o[g] += p[g * kSplitKeys + jb + u] * v[u];
            }
        }
#pragma unroll
        for (int g = 0; g < kMaxGroup; ++g)
            if (g < heads) partial_at(a, n_splits, blockIdx.z, h0 + g, split)[d] = o[g];
    }
    if (threadIdx.x < heads) {
        float* part = partial_at(a, n_splits, blockIdx.z, h0 + threadIdx.x, split);
        part[hd] = head_max[threadIdx.x];
        part[hd + 1] = head_sum[threadIdx.x];
    }
}

// Splits that hold keys of `row` (the others' blocks leave without writing): the grid is sized
// for the context, so that a captured step graph serves every depth.
__device__ __forceinline__ int live_splits(const DecodeAttentionArgs& a, int64_t row, int n_splits) {
    return static_cast<int>(min(int64_t(n_splits), blocks::decode_live_splits(key_positions(a, row))));
}

constexpr int kReduceThreads = 128;

// grid = (n_head, rows), 128 threads over the value head: every live split rescaled to the
// global max, divided by the global sum (a sink is one more score, with no value). The splits'
// maxima and sums are read at once, one split a thread, into shared memory, so that no read
// waits on another (a deep row has 128 splits); the sums are then added in split order, as one
// thread would add them.
__global__ void __launch_bounds__(kReduceThreads) decode_reduce_kernel(DecodeAttentionArgs a, int64_t row0, int n_splits) {
    // Each live split's exp(max - global max), then its sum: n_splits each, rounded up to 4.
    extern __shared__ float weight[];
    float* split_sum = weight + (n_splits + 3) / 4 * 4;
    __shared__ float warp_best[kReduceThreads / 32];
    __shared__ float total;
    const int head = blockIdx.x, vd = value_dim(a);
    const int64_t row = row0 + blockIdx.y;
    const int live = live_splits(a, row, n_splits);
    float mx = a.sinks ? a.sinks[head] : -INFINITY;
    for (int s = threadIdx.x; s < live; s += kReduceThreads) {
        const float* part = partial_at(a, n_splits, blockIdx.y, head, s);
        weight[s] = part[a.head_dim];  // the split's max, for now
        split_sum[s] = part[a.head_dim + 1];
        mx = fmaxf(mx, weight[s]);
    }
    mx = warp_max(mx);
    if (threadIdx.x % 32 == 0) warp_best[threadIdx.x / 32] = mx;
    __syncthreads();
    for (int w = 0; w < kReduceThreads / 32; ++w) mx = fmaxf(mx, warp_best[w]);
    for (int s = threadIdx.x; s < live; s += kReduceThreads) weight[s] = weight[s] == -INFINITY ? 0.0f : expf(weight[s] - mx);
    __syncthreads();
    if (threadIdx.x == 0) {
        float sum = a.sinks ? expf(a.sinks[head] - mx) : 0.0f;
        for (int s = 0; s < live; ++s)
            if (weight[s] != 0.0f) sum += split_sum[s] * weight[s];
        total = sum;
    }
    __syncthreads();
    float* out = a.out + (row * a.n_head + head) * vd;
    for (int d = threadIdx.x; d < vd; d += kReduceThreads) {
        float o = 0.0f;
        for (int s = 0; s < live; ++s) o += partial_at(a, n_splits, blockIdx.y, head, s)[d] * weight[s];
        out[d] = o / total;
    }
}

// Rows [row0, row0 + n_rows), no more than the scratch holds: the splits, then their combination.
void decode_launch(const DecodeAttentionArgs& a, int64_t row0, int64_t n_rows, CudaStream& s) {
    const int n_splits = static_cast<int>(blocks::decode_grid_splits(a.max_blocks));
    const int group = a.n_head / a.n_head_kv, passes = (group + kMaxGroup - 1) / kMaxGroup;
    const int heads = group < kMaxGroup ? group : kMaxGroup;
    const size_t smem = sizeof(float) * size_t(heads) * (a.head_dim + kSplitKeys);
    const float scale = attention_scale(a);
    const bool eight = kv_eight_ok(a);
    const dim3 grid(static_cast<unsigned>(n_splits), static_cast<unsigned>(a.n_head_kv * passes),
                    static_cast<unsigned>(n_rows));
    with_kv_kind(a.kv_type, [&](auto kind) {
        constexpr KvKind K = decltype(kind)::value;
        if (eight) {
            allow_smem(decode_split_kernel<K, true>, smem);
            decode_split_kernel<K, true><<<grid, kThreads, smem, s.get()>>>(a, row0, n_splits, passes, scale);
        } else {
            allow_smem(decode_split_kernel<K, false>, smem);
            decode_split_kernel<K, false><<<grid, kThreads, smem, s.get()>>>(a, row0, n_splits, passes, scale);
        }
    });
    cuda_check_launch("attention (decode splits)");
    // Whole 16-byte words: the compiler reads the weights four at a time, for the last 1-3 splits too.
    const size_t weights = 2 * sizeof(float) * size_t((n_splits + 3) / 4 * 4);
    allow_smem(decode_reduce_kernel, weights);
    decode_reduce_kernel<<<dim3(a.n_head, static_cast<unsigned>(n_rows)), kReduceThreads, weights, s.get()>>>(a, row0, n_splits);
    cuda_check_launch("attention (decode reduce)");
}

}  // namespace

void decode_attention_rows(const DecodeAttentionArgs& a, int64_t row0, int64_t n_rows, CudaStream& s) {
    const int64_t per_launch = attention_rows_per_launch(a.n_head, a.head_dim, a.max_blocks);
    for (int64_t r = row0; r < row0 + n_rows; r += per_launch) decode_launch(a, r, std::min(per_launch, row0 + n_rows - r), s);
}

}  // namespace strata::gpu
