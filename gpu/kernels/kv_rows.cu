// Rows of the paged KV cache written from floats and read back, in every KV type: F32, F16 and
// BF16 value by value; Q8_0 and Q4_0 one warp per block of 32, with cpu::store_kv_row's
// operations (kv_blocks.h), so the device writes the same bytes as the CPU. Keys may be rotated
// (RoPE) as they are read, which saves the rope kernel's launch and its pass over the rows.
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

// grid = (n_tok, row_blocks(n)), 128 threads: values [128 blockIdx.y, +128) of row blockIdx.x.
template <KvKind kKind>
__global__ void store_float_kernel(const float* src, KvRows r, KeyRope rope) {
    const int64_t t = blockIdx.x;
    uint8_t* dst = row_of(r, t);
    if (const int64_t i = int64_t(blockIdx.y) * kRowThreads + threadIdx.x; i < r.n) {
        const float x = source_value(src, t, i, r.n, rope);
        if constexpr (kKind == KvKind::F32) {
            reinterpret_cast<float*>(dst)[i] = x;
        } else if constexpr (kKind == KvKind::F16) {
            reinterpret_cast<uint16_t*>(dst)[i] = blocks::f32_to_half(x);
        } else {
            reinterpret_cast<__nv_bfloat16*>(dst)[i] = __float2bfloat16_rn(x);
        }
    }
}

// grid = (n_tok, blocks of 4 value blocks), 4 warps: warp w quantizes value block
// 4 blockIdx.y + w of row blockIdx.x, lane j its value j.
template <KvKind kKind>
__global__ void store_block_kernel(const float* src, KvRows r, KeyRope rope) {
    const int64_t t = blockIdx.x, b = int64_t(blockIdx.y) * 4 + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (b >= r.n / 32) return;  // a whole warp leaves together
    const float x = source_value(src, t, 32 * b + lane, r.n, rope);
    uint8_t* dst = row_of(r, t);
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

// grid = (n_tok, row_blocks(n)), 128 threads, as store_float_kernel.
template <KvKind kKind>
__global__ void gather_kernel(KvRows r, float* dst) {
    const int64_t t = blockIdx.x;
    const uint8_t* src = row_of(r, t);
    if (const int64_t i = int64_t(blockIdx.y) * kRowThreads + threadIdx.x; i < r.n) dst[t * r.n + i] = KvElem<kKind>::one(src, i);
}

void store_rows(const float* src, const KvRows& r, const KeyRope& rope, CudaStream& s) {
    if (r.n_tok == 0) return;
    with_kv_kind(r.type, [&](auto kind) {
        constexpr KvKind K = decltype(kind)::value;
        if constexpr (K == KvKind::Q8_0 || K == KvKind::Q4_0) {
            if (r.n % 32 != 0) throw BackendError("gpu: a quantized KV row must hold whole blocks of 32", "use --kv-type f16");
            const dim3 grid(static_cast<unsigned>(r.n_tok), static_cast<unsigned>((r.n / 32 + 3) / 4));
            store_block_kernel<K><<<grid, 128, 0, s.get()>>>(src, r, rope);
        } else {
            const dim3 grid(static_cast<unsigned>(r.n_tok), row_blocks(r.n));
            store_float_kernel<K><<<grid, kRowThreads, 0, s.get()>>>(src, r, rope);
        }
    });
    cuda_check_launch(rope.pos ? "rope_kv_store" : "kv_store");
}

}  // namespace

bool gpu_kv_type(DType t) {
    return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::Q8_0 || t == DType::Q4_0;
}

void kv_store(const float* src, const KvRows& r, CudaStream& s) { store_rows(src, r, {}, s); }

void rope_kv_store(const float* src, const int32_t* pos, const RopeArgs& a, const KvRows& r, CudaStream& s) {
    STRATA_ASSERT(a.n_rot % 2 == 0 && a.n_rot <= a.head_dim && int64_t(a.n_heads) * a.head_dim == r.n);
    store_rows(src, r, {pos, a}, s);
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
