// Device::head_matmul: every head's product with its own matrix (MLA's attn_k_b and attn_v_b) in
// one launch, where a product a head took three to four launches (its values gathered, the
// product, the result and the rest of the row put in place). A warp computes one product row for
// up to kTok tokens: its lanes take 8 weight values at a time (block types: the block's values8,
// the CPU reference's arithmetic) or one (float types) against the input read as floats, summed
// in float.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "core/error.h"
#include "gpu/cuda_check.h"
#include "gpu/cuda_kernels.h"
#include "gpu/kernels/block_types.h"
#include "gpu/kernels/float_weights.cuh"
#include "gpu/kernels/reduce.cuh"

namespace strata::gpu {
namespace {

constexpr int kWarps = 8;  // product rows a thread block
constexpr int kTok = 8;    // token rows a warp takes, each weight decoded once for them

// Row j of head h's matrix, and the first of the tokens' values of head h, for the thread's warp.
struct HeadRow {
    const uint8_t* w;
    const float* x;
    float* y;
    int64_t j;
    int n_tok;
};
__device__ __forceinline__ HeadRow head_row(const HeadMatmulArgs& a, const uint8_t* w, uint64_t row_bytes) {
    const int64_t j = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32, h = blockIdx.y, t = int64_t(blockIdx.z) * kTok;
    return {w + uint64_t(h * a.n_rows + j) * row_bytes, a.x + t * a.x_row + h * a.x_head, a.y + t * a.y_row + h * a.y_head + j, j,
            int(min(int64_t(kTok), a.n_tok - t))};
}

// Each token's lane sums added across the warp and written: a token's bits do not depend on the
// others of its warp.
__device__ __forceinline__ void write_sums(const HeadRow& r, const HeadMatmulArgs& a, const float (&sum)[kTok]) {
#pragma unroll
    for (int t = 0; t < kTok; ++t) {
        const float total = warp_sum(sum[t]);
        if (t < r.n_tok && threadIdx.x % 32 == 0) r.y[t * a.y_row] = total;
    }
}

// grid = (ceil(n_rows / kWarps), n_heads, ceil(n_tok / kTok)), 32 kWarps threads.
template <class B>
__global__ void head_matvec_blocks(const uint8_t* __restrict__ w, uint64_t row_bytes, HeadMatmulArgs a) {
    const HeadRow r = head_row(a, w, row_bytes);
    if (r.j >= a.n_rows) return;  // a whole warp leaves together
    float sum[kTok] = {};
    for (int64_t p = threadIdx.x % 32; p < a.n_cols / 8; p += 32) {
        float v[8];
        B::values8(r.w, p / 4, int(p % 4), v);
#pragma unroll
        for (int t = 0; t < kTok; ++t) {
            if (t >= r.n_tok) break;
            const float* x = r.x + t * a.x_row + 8 * p;
#pragma unroll
            for (int i = 0; i < 8; ++i) sum[t] += v[i] * x[i];
        }
    }
    write_sums(r, a, sum);
}

template <class T>
__global__ void head_matvec_floats(const uint8_t* __restrict__ w, uint64_t row_bytes, HeadMatmulArgs a) {
    const HeadRow r = head_row(a, w, row_bytes);
    if (r.j >= a.n_rows) return;
    const T* row = reinterpret_cast<const T*>(r.w);
    float sum[kTok] = {};
    for (int64_t k = threadIdx.x % 32; k < a.n_cols; k += 32) {
        const float v = weight_value(row + k);
#pragma unroll
        for (int t = 0; t < kTok; ++t) {
            if (t >= r.n_tok) break;
            sum[t] += v * r.x[t * a.x_row + k];
        }
    }
    write_sums(r, a, sum);
}

}  // namespace

void head_matmul(const HeadMatmulArgs& a, CudaStream& s) {
    if (a.n_tok == 0 || a.n_heads == 0 || a.n_rows == 0) return;
    if (!gpu_weight_type(a.type) || a.n_cols % traits(a.type).block_elems != 0)
        throw BackendError("gpu: no per-head product for " + std::to_string(a.n_cols) + "-value rows of " +
                               std::string(dtype_name(a.type)),
                           "run this model on the CPU (--device cpu)");
    if (a.n_heads > 65535 || a.n_tok > 65535 * kTok)
        throw BackendError("gpu: a per-head product of too many heads or rows", "an internal error; please report it");
    const dim3 grid(static_cast<unsigned>((a.n_rows + kWarps - 1) / kWarps), static_cast<unsigned>(a.n_heads),
                    static_cast<unsigned>((a.n_tok + kTok - 1) / kTok));
    const auto* w = static_cast<const uint8_t*>(a.w);
    const uint64_t rb = row_bytes(a.type, a.n_cols);
    switch (a.type) {
        case DType::F32: head_matvec_floats<float><<<grid, 32 * kWarps, 0, s.get()>>>(w, rb, a); break;
        case DType::F16: head_matvec_floats<__half><<<grid, 32 * kWarps, 0, s.get()>>>(w, rb, a); break;
        case DType::BF16: head_matvec_floats<__nv_bfloat16><<<grid, 32 * kWarps, 0, s.get()>>>(w, rb, a); break;
        default:
            blocks::with_block(a.type, [&](auto block) {
                head_matvec_blocks<decltype(block)><<<grid, 32 * kWarps, 0, s.get()>>>(w, rb, a);
            });
    }
    cuda_check_launch("head_matmul");
}

}  // namespace strata::gpu
