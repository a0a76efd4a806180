// Rows of the paged KV cache written from floats and read back, in every KV type: F32, F16 and
// BF16 value by value; Q8_0 and Q4_0 one warp per block of 32, with cpu::store_kv_row's
// operations (kv_blocks.h), so the device writes the same bytes as the CPU. rope_qkv_store rotates
// a layer's queries in place and its keys as they are read, and stores keys and values, in one
// launch: the rope kernel's two launches and passes over the rows and the value store's launch
// saved (with the KV cache on the host, it rotates queries and keys in place: one launch for two).
#include "gpu/cuda_check.h"
#include "gpu/cuda_kernels.h"
#include "gpu/kernels/attention_common.cuh"
#include "gpu/kernels/rope_angle.cuh"

namespace strata::gpu {
namespace {

using blocks::KvElem;
using blocks::KvKind;

__device__ __forceinline__ uint8_t* row_of(const KvRows& r, int64_t t) {
    return static_cast<uint8_t*>(r.cache) + int64_t(r.block[t]) * r.block_stride + int64_t(r.row[t]) * r.row_stride;
}

// The rotation a store applies to its rows: none where pos is null.
struct KeyRope {
    const int32_t* pos = nullptr;
    RopeArgs args;
};

// Value i of row t of the source, rotated where the store says so.
__device__ __forceinline__ float source_value(const float* src, int64_t t, int64_t i, int64_t n, const KeyRope& rope) {
    return rope.pos ? rope_value(src + t * n, i, rope.pos[t], rope.args) : src[t * n + i];
}

constexpr int kRowThreads = 128;
// Blocks a row of n values takes, 128 values each: a decode step's one row spreads over many
// SMs instead of looping on one (each value's RoPE angle is computed in double).
unsigned row_blocks(int64_t n) { return static_cast<unsigned>((n + kRowThreads - 1) / kRowThreads); }

// Thread blocks of 128 threads that store a row: one a value in float types (row_blocks), one a
// warp's block of 32 values in quantized ones (four blocks of 32 a thread block).
template <KvKind kKind>
unsigned store_blocks(int64_t n) {
    if constexpr (kKind == KvKind::Q8_0 || kKind == KvKind::Q4_0) return static_cast<unsigned>((n / 32 + 3) / 4);
    return row_blocks(n);
}

// Thread block `part` (of store_blocks) of row t stored, 128 threads. Float types: values
// [128 part, +128), one a thread. Quantized: warp w quantizes value block 4 part + w, lane j its value j.
template <KvKind kKind>
__device__ __forceinline__ void store_part(const float* src, const KvRows& r, const KeyRope& rope, int64_t t, int64_t part) {
    uint8_t* dst = row_of(r, t);
    if constexpr (kKind == KvKind::F32 || kKind == KvKind::F16 || kKind == KvKind::BF16) {
        if (const int64_t i = part * kRowThreads + threadIdx.x; i < r.n) {
            const float x = source_value(src, t, i, r.n, rope);
            if constexpr (kKind == KvKind::F32) {
                reinterpret_cast<float*>(dst)[i] = x;
            } else if constexpr (kKind == KvKind::F16) {
                reinterpret_cast<uint16_t*>(dst)[i] = blocks::f32_to_half(x);
            } else {
                reinterpret_cast<__nv_bfloat16*>(dst)[i] = __float2bfloat16_rn(x);
            }
        }
    } else {
        const int64_t b = part * 4 + threadIdx.x / 32;
        const int lane = threadIdx.x % 32;
        if (b >= r.n / 32) return;  // a whole warp leaves together
        const float x = source_value(src, t, 32 * b + lane, r.n, rope);
        if constexpr (kKind == KvKind::Q8_0) {
            const blocks::KvQ8_0Scale s = blocks::kv_q8_0_scale(warp_max(fabsf(x)));
            uint8_t* blk = dst + 34 * b;
            blk[2 + lane] = static_cast<uint8_t>(blocks::kv_q8_0_level(x, s.id));
            if (lane == 0) blk[0] = uint8_t(s.d_bits), blk[1] = uint8_t(s.d_bits >> 8);
        } else {
            // The value of largest magnitude, the first of equals; +0 when every value is zero.
            float best = fabsf(x), value = x;
            int at = lane;
#pragma unroll
            for (int o = 16; o > 0; o /= 2) {
                const float ob = __shfl_xor_sync(kFullMask, best, o), ov = __shfl_xor_sync(kFullMask, value, o);
                const int oa = __shfl_xor_sync(kFullMask, at, o);
                if (ob > best || (ob == best && oa < at)) best = ob, value = ov, at = oa;
            }
            const blocks::KvQ4_0Scale s = blocks::kv_q4_0_scale(best > 0.0f ? value : 0.0f);
            const float upper = __shfl_down_sync(kFullMask, x, 16);  // lane j < 16: value j + 16
            uint8_t* blk = dst + 18 * b;
            if (lane < 16)
                blk[2 + lane] = static_cast<uint8_t>(blocks::kv_q4_0_level(x, s.id) | blocks::kv_q4_0_level(upper, s.id) << 4);
            if (lane == 0) blk[0] = uint8_t(s.d_bits), blk[1] = uint8_t(s.d_bits >> 8);
        }
    }
}

// grid = (n_tok, store_blocks(n)), 128 threads.
template <KvKind kKind>
__global__ void store_kernel(const float* __restrict__ src, KvRows r) {
    store_part<kKind>(src, r, {}, blockIdx.x, blockIdx.y);
}

// What rope_qkv_store_kernel takes besides its rows: the thread blocks of each part of a token.
struct QkvParts {
    const int32_t* pos;
    RopeArgs q_rope, k_rope;
    KvRows k_rows, v_rows;
    // The query heads (0: none), then the key row's store_blocks (without a key cache: its
    // heads, rotated in place); the value row's after.
    unsigned q_heads, k_blocks;
};

// grid = (n_tok, q_heads + k_blocks + the value row's store_blocks), 128 threads: thread block
// y of token x rotates query head y, else stores block y - q_heads of the key row rotated (or
// rotates that key head in place), else stores the rest of the value row. A block's part is one
// branch for all its threads.
template <KvKind kKind>
__global__ void rope_qkv_store_kernel(float* __restrict__ q, float* __restrict__ k, const float* __restrict__ v, QkvParts p) {
    const int64_t t = blockIdx.x;
    const unsigned y = blockIdx.y;
    if (y < p.q_heads)
        rope_head(rope_row(q, t, p.q_rope) + int64_t(y) * p.q_rope.head_dim, p.pos[t], p.q_rope, threadIdx.x, blockDim.x);
    else if (y < p.q_heads + p.k_blocks && !p.k_rows.cache)
        rope_head(rope_row(k, t, p.k_rope) + int64_t(y - p.q_heads) * p.k_rope.head_dim, p.pos[t], p.k_rope, threadIdx.x, blockDim.x);
    else if (y < p.q_heads + p.k_blocks)
        store_part<kKind>(k, p.k_rows, {p.pos, p.k_rope}, t, y - p.q_heads);
    else
        store_part<kKind>(v, p.v_rows, {}, t, y - p.q_heads - p.k_blocks);
}

// grid = (n_tok, row_blocks(n)), 128 threads: values [128 blockIdx.y, +128) of row blockIdx.x.
template <KvKind kKind>
__global__ void gather_kernel(KvRows r, float* dst) {
    const int64_t t = blockIdx.x;
    const uint8_t* src = row_of(r, t);
    if (const int64_t i = int64_t(blockIdx.y) * kRowThreads + threadIdx.x; i < r.n) dst[t * r.n + i] = KvElem<kKind>::one(src, i);
}

void check_whole_blocks(const KvRows& r) {
    if ((r.type == DType::Q8_0 || r.type == DType::Q4_0) && r.n % 32 != 0)
        throw BackendError("gpu: a quantized KV row must hold whole blocks of 32", "use --kv-type f16");
}

}  // namespace

bool gpu_kv_type(DType t) {
    return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::Q8_0 || t == DType::Q4_0;
}

void kv_store(const float* src, const KvRows& r, CudaStream& s) {
    if (r.n_tok == 0) return;
    check_whole_blocks(r);
    with_kv_kind(r.type, [&](auto kind) {
        constexpr KvKind K = decltype(kind)::value;
        store_kernel<K><<<dim3(static_cast<unsigned>(r.n_tok), store_blocks<K>(r.n)), kRowThreads, 0, s.get()>>>(src, r);
    });
    cuda_check_launch("kv_store");
}

void rope_qkv_store(const QkvStoreArgs& a, CudaStream& s) {
    const KvRows& kr = a.k_rows;
    const RopeArgs& kq = a.k_rope;
    STRATA_ASSERT(kq.n_rot % 2 == 0 && kq.n_rot <= kq.head_dim && int64_t(kq.n_heads) * kq.head_dim == kr.n);
    STRATA_ASSERT(!a.q || (a.q_rope.n_rot % 2 == 0 && a.q_rope.n_rot <= a.q_rope.head_dim));
    STRATA_ASSERT(!a.v || (kr.cache && a.v_rows.n_tok == kr.n_tok && a.v_rows.type == kr.type));
    if (kr.n_tok == 0) return;
    if (kr.cache) check_whole_blocks(kr);
    if (a.v) check_whole_blocks(a.v_rows);
    with_kv_kind(kr.type, [&](auto kind) {
        constexpr KvKind K = decltype(kind)::value;
        const unsigned k_blocks = kr.cache ? store_blocks<K>(kr.n) : static_cast<unsigned>(kq.n_heads);
        const QkvParts p{a.pos, a.q_rope, kq, kr, a.v_rows, a.q ? static_cast<unsigned>(a.q_rope.n_heads) : 0u, k_blocks};
        const unsigned parts = p.q_heads + p.k_blocks + (a.v ? store_blocks<K>(a.v_rows.n) : 0u);
        rope_qkv_store_kernel<K><<<dim3(static_cast<unsigned>(kr.n_tok), parts), kRowThreads, 0, s.get()>>>(a.q, a.k, a.v, p);
    });
    cuda_check_launch("rope_qkv_store");
}

void kv_gather(const KvRows& r, float* dst, CudaStream& s) {
    if (r.n_tok == 0) return;
    with_kv_kind(r.type, [&](auto kind) {
        const dim3 grid(static_cast<unsigned>(r.n_tok), row_blocks(r.n));
        gather_kernel<decltype(kind)::value><<<grid, kRowThreads, 0, s.get()>>>(r, dst);
    });
    cuda_check_launch("kv_gather");
}

}  // namespace strata::gpu
