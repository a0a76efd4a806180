// Decode attention over a paged KV cache (one query token per sequence), split over KV blocks
// like flash-decoding: each split computes an unnormalised partial result with its own max and
// sum, a second kernel rescales and combines them. Same maths as cpu::attention_tile_ref. The
// cache's elements are read as float whatever their type (kv_element.cuh).
#include <cmath>

#include "gpu/cuda_check.h"
#include "gpu/cuda_kernels.h"
#include "gpu/kernels/kv_element.cuh"

namespace strata::gpu {
namespace {

constexpr int kSplitKeys = kAttentionSplitBlocks * kKvBlockSize;  // 128 keys per split
constexpr int kThreads = kSplitKeys;  // one thread per key of a split for the softmax step
constexpr int kWarps = kThreads / 32;

// Scratch per (sequence, head, split): head_dim partial outputs, then the max and the sum.
__device__ __forceinline__ float* partial_at(const CudaAttentionArgs& a, int n_splits, int seq, int head, int split) {
    return a.scratch + ((static_cast<int64_t>(seq) * a.n_head + head) * n_splits + split) * (a.head_dim + 2);
}

// grid = (n_splits, n_head, n_seq), block = 128 threads; dynamic shared memory holds the scaled
// query (head_dim floats) and the split's 128 scores.
template <class T>
__global__ void attention_split_kernel(CudaAttentionArgs a, int n_splits) {
    extern __shared__ float smem[];
    float* q = smem;
    float* p = smem + a.head_dim;
    const int split = blockIdx.x, head = blockIdx.y, seq = blockIdx.z;
    const int hk = head / (a.n_head / a.n_head_kv);
    const int64_t n_kv = a.n_kv[seq];
    const int64_t j0 = static_cast<int64_t>(split) * kSplitKeys;
    const int n = static_cast<int>(n_kv - j0 < kSplitKeys ? n_kv - j0 : kSplitKeys);  // keys of this split (may be <= 0)
    float* part = partial_at(a, n_splits, seq, head, split);
    if (n <= 0) {  // past the sequence's end: contributes nothing
        for (int d = threadIdx.x; d < a.head_dim; d += kThreads) part[d] = 0.0f;
        if (threadIdx.x == 0) {
            part[a.head_dim] = -INFINITY;
            part[a.head_dim + 1] = 0.0f;
        }
        return;
    }
    const float scale = 1.0f / sqrtf(float(a.head_dim));
    const float* qh = a.q + (static_cast<int64_t>(seq) * a.n_head + head) * a.head_dim;
    for (int d = threadIdx.x; d < a.head_dim; d += kThreads) q[d] = qh[d] * scale;
    __syncthreads();

    const int32_t* table = a.block_tables + static_cast<int64_t>(seq) * a.max_blocks;
    auto row = [&](const void* base, int64_t j) {  // key/value j of this sequence, KV head hk
        return static_cast<const T*>(base) + table[j / kKvBlockSize] * a.block_stride + (j % kKvBlockSize) * a.kv_stride +
               static_cast<int64_t>(hk) * a.head_dim;
    };
    // Scores: warp w takes keys w, w + 4, ...; its lanes read the key row contiguously.
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int j = warp; j < n; j += kWarps) {
        const T* k = row(a.k, j0 + j);
        float dot = 0.0f;
        for (int d = lane; d < a.head_dim; d += 32) dot += q[d] * kv_load(k + d);
        for (int o = 16; o > 0; o /= 2) dot += __shfl_xor_sync(0xFFFFFFFFu, dot, o);
        if (lane == 0) p[j] = dot;
    }
    __syncthreads();
    // Softmax numerators: every thread reads the (broadcast) scores for the max, then thread j
    // turns score j into exp(score - max).
    float mx = -INFINITY;
    for (int j = 0; j < n; ++j) mx = fmaxf(mx, p[j]);
    __syncthreads();
    if (threadIdx.x < n) p[threadIdx.x] = expf(p[threadIdx.x] - mx);
    __syncthreads();
    // Partial output: thread d accumulates column d over the split's value rows (coalesced).
    for (int d = threadIdx.x; d < a.head_dim; d += kThreads) {
        float o = 0.0f;
        for (int j = 0; j < n; ++j) o += p[j] * kv_load(row(a.v, j0 + j) + d);
        part[d] = o;
    }
    if (threadIdx.x == 0) {
        float sum = 0.0f;
        for (int j = 0; j < n; ++j) sum += p[j];
        part[a.head_dim] = mx;
        part[a.head_dim + 1] = sum;
    }
}

// grid = (n_head, n_seq), block = 128 threads over head_dim: rescales every split to the global
// max and divides by the global sum.
__global__ void attention_reduce_kernel(CudaAttentionArgs a, int n_splits) {
    const int head = blockIdx.x, seq = blockIdx.y;
    float mx = -INFINITY;
    for (int s = 0; s < n_splits; ++s) mx = fmaxf(mx, partial_at(a, n_splits, seq, head, s)[a.head_dim]);
    float sum = 0.0f;
    for (int s = 0; s < n_splits; ++s) {
        const float* part = partial_at(a, n_splits, seq, head, s);
        sum += part[a.head_dim + 1] * expf(part[a.head_dim] - mx);  // empty splits: 0 * exp(-inf) = 0
    }
    float* out = a.out + (static_cast<int64_t>(seq) * a.n_head + head) * a.head_dim;
    for (int d = threadIdx.x; d < a.head_dim; d += blockDim.x) {
        float o = 0.0f;
        for (int s = 0; s < n_splits; ++s) {
            const float* part = partial_at(a, n_splits, seq, head, s);
            o += part[d] * expf(part[a.head_dim] - mx);
        }
        out[d] = o / sum;
    }
}

// grid = n_tok, block = 128 threads over the row's n values.
template <class T>
__global__ void kv_store_kernel(const float* src, T* cache, const int32_t* block, const int32_t* row, int64_t n,
                                int64_t kv_stride, int64_t block_stride) {
    const int64_t t = blockIdx.x;
    T* dst = cache + block[t] * block_stride + row[t] * kv_stride;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) kv_put(dst + i, src[t * n + i]);
}

template <class T>
__global__ void kv_gather_kernel(const T* cache, const int32_t* block, const int32_t* row, int64_t n, int64_t kv_stride,
                                 int64_t block_stride, float* dst) {
    const int64_t t = blockIdx.x;
    const T* src = cache + block[t] * block_stride + row[t] * kv_stride;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) dst[t * n + i] = kv_load(src + i);
}

}  // namespace

bool gpu_kv_type(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

void kv_store(const float* src, void* cache, DType type, const int32_t* block, const int32_t* row, int64_t n_tok,
              int64_t n, int64_t kv_stride, int64_t block_stride, CudaStream& s) {
    if (n_tok == 0) return;
    with_kv_element(type, [&](auto element) {
        using T = decltype(element);
        kv_store_kernel<T><<<static_cast<unsigned>(n_tok), 128, 0, s.get()>>>(src, static_cast<T*>(cache), block, row, n,
                                                                               kv_stride, block_stride);
        cuda_check_launch("kv_store");
    });
}

void kv_gather(const void* cache, DType type, const int32_t* block, const int32_t* row, int64_t n_tok, int64_t n,
               int64_t kv_stride, int64_t block_stride, float* dst, CudaStream& s) {
    if (n_tok == 0) return;
    with_kv_element(type, [&](auto element) {
        using T = decltype(element);
        kv_gather_kernel<T><<<static_cast<unsigned>(n_tok), 128, 0, s.get()>>>(static_cast<const T*>(cache), block, row, n,
                                                                               kv_stride, block_stride, dst);
        cuda_check_launch("kv_gather");
    });
}

void decode_attention(const CudaAttentionArgs& a, CudaStream& s) {
    STRATA_ASSERT(a.n_head_kv > 0 && a.n_head % a.n_head_kv == 0 && a.head_dim > 0 && a.max_blocks > 0);
    if (a.n_seq == 0) return;
    const int n_splits = (a.max_blocks + kAttentionSplitBlocks - 1) / kAttentionSplitBlocks;
    const size_t smem = sizeof(float) * (a.head_dim + kSplitKeys);
    with_kv_element(a.kv_type, [&](auto element) {
        attention_split_kernel<decltype(element)><<<dim3(n_splits, a.n_head, a.n_seq), kThreads, smem, s.get()>>>(a, n_splits);
        cuda_check_launch("decode_attention (splits)");
    });
    attention_reduce_kernel<<<dim3(a.n_head, a.n_seq), 128, 0, s.get()>>>(a, n_splits);
    cuda_check_launch("decode_attention (reduce)");
}

}  // namespace strata::gpu
