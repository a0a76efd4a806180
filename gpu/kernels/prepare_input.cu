// A matmul's input in the form its kernel reads, with the input's transform (RMSNorm or SwiGLU)
// applied on the way: int8 blocks in the CPU's Q8x2 format for the decode kernel (byte for byte
// what cpu::quantize_act_ref writes of the transformed values), half precision or bfloat16 for
// the tensor cores and cuBLAS, or float. Elementwise inputs go one warp per block of 32 values;
// an RMSNorm needs its row's sum of squares first: each thread block computes it (the row is in
// L2) and transforms its 256 values of the row, so that a decode step's one row spreads over
// many SMs.
#include "gpu/cuda_check.h"
#include "gpu/cuda_kernels.h"
#include "gpu/kernels/reduce.cuh"
#include "gpu/kernels/block_quantize.h"

namespace strata::gpu {
namespace {

using namespace blocks;

// Value i of row t after the elementwise part of the transform (SwiGLU), before any norm.
__device__ __forceinline__ float input_value(const float* x, const float* up, int64_t at) {
    const float g = x[at];
    return up ? g / (1.0f + expf(-g)) * up[at] : g;
}

// Quantizes value `v` (lane j of the warp holds value j of activation block b) into row `row`.
__device__ __forceinline__ void quantize_block(float v, uint8_t* row, int64_t n_cols, int64_t b, bool two_level) {
    const int lane = threadIdx.x % 32;
    const Q8x2Scale s = q8x2_scale(warp_max(fabsf(v)));
    int8_t hi, lo;
    q8x2_levels(v, s, two_level, hi, lo);
    row[kActBlock * b + lane] = static_cast<uint8_t>(hi);
    row[n_cols + kActBlock * b + lane] = static_cast<uint8_t>(lo);
    int32_t c = 256 * int32_t(hi) + int32_t(lo);  // sums over each half of the block (16 lanes)
#pragma unroll
    for (int o = 8; o > 0; o /= 2) c += __shfl_xor_sync(kFullMask, c, o);
    const int32_t upper = __shfl_sync(kFullMask, c, 16);
    if (lane == 0) {
        const int32_t s16[2] = {c, upper};
        finish_block_q8x2(row, n_cols, b, s.d, s16);
    }
}

// grid = (blocks of 4 activation blocks, n_tok), 4 warps: warp w quantizes activation block
// 4 blockIdx.x + w of row blockIdx.y.
__global__ void __launch_bounds__(128) quantize_kernel(const float* __restrict__ x, const float* __restrict__ up,
                                                        int64_t n_cols, uint8_t* __restrict__ out, uint64_t out_stride,
                                                        bool two_level) {
    const int64_t b = int64_t(blockIdx.x) * 4 + threadIdx.x / 32;
    if (b >= n_cols / kActBlock) return;  // a whole warp leaves together
    const int64_t at = int64_t(blockIdx.y) * n_cols + kActBlock * b + threadIdx.x % 32;
    quantize_block(input_value(x, up, at), out + uint64_t(blockIdx.y) * out_stride, n_cols, b, two_level);
}

constexpr int kRowThreads = 256;
constexpr int64_t kWholeRows = 64;  // from this many rows on, a thread block takes a whole row

// grid = (n_tok, column chunks), 256 threads: row blockIdx.x transformed (RMSNorm when norm_w is
// set, SwiGLU when up is) and written in `format`, its 256-column chunks blockIdx.y,
// blockIdx.y + gridDim.y, ... (the same values whatever the grid).
__global__ void __launch_bounds__(kRowThreads) row_input_kernel(const float* __restrict__ x, InputTransform tf,
                                                                int64_t n_cols, InputFormat format, void* out,
                                                                uint64_t out_stride) {
    const int64_t t = blockIdx.x;
    const float* xr = x + t * n_cols;
    const float scale = tf.norm_w ? row_rms_scale<kRowThreads>(xr, n_cols, tf.norm_eps) : 1.0f;
    auto value = [&](int64_t i) {
        const float v = input_value(xr, tf.swiglu_up ? tf.swiglu_up + t * n_cols : nullptr, i);
        return tf.norm_w ? v * scale * tf.norm_w[i] : v;
    };
    const int64_t first = int64_t(blockIdx.y) * kRowThreads, step = int64_t(gridDim.y) * kRowThreads;
    if (format == InputFormat::Q8x2 || format == InputFormat::Q8) {
        uint8_t* row = static_cast<uint8_t*>(out) + t * out_stride;
        for (int64_t b = (first + threadIdx.x) / kActBlock; b < n_cols / kActBlock; b += step / kActBlock)  // a warp's block
            quantize_block(value(kActBlock * b + threadIdx.x % 32), row, n_cols, b, format == InputFormat::Q8x2);
        return;
    }
    for (int64_t i = first + threadIdx.x; i < n_cols; i += step) {
        const float v = value(i);
        if (format == InputFormat::F32) static_cast<float*>(out)[t * n_cols + i] = v;
        if (format == InputFormat::F16) static_cast<__half*>(out)[t * n_cols + i] = __float2half_rn(v);
        if (format == InputFormat::BF16) static_cast<__nv_bfloat16*>(out)[t * n_cols + i] = __float2bfloat16_rn(v);
    }
}

}  // namespace

uint64_t input_bytes(InputFormat format, int64_t n_tok, int64_t n_cols) {
    switch (format) {
        case InputFormat::Q8x2: case InputFormat::Q8: return uint64_t(n_tok) * act_row_bytes(n_cols);
        case InputFormat::F16: case InputFormat::BF16: return uint64_t(n_tok) * uint64_t(n_cols) * 2;
        case InputFormat::F32: return uint64_t(n_tok) * uint64_t(n_cols) * 4;
        case InputFormat::Direct: return 0;
    }
    return 0;
}

void prepare_input(const float* x, const InputTransform& tf, int64_t n_tok, int64_t n_cols, InputFormat format, void* out,
                   CudaStream& s) {
    if (n_tok == 0 || format == InputFormat::Direct) return;
    const bool quantized = format == InputFormat::Q8x2 || format == InputFormat::Q8;
    if (quantized && !tf.norm_w) {
        const dim3 grid(static_cast<unsigned>((n_cols / kActBlock + 3) / 4), static_cast<unsigned>(n_tok));
        quantize_kernel<<<grid, 128, 0, s.get()>>>(x, tf.swiglu_up, n_cols, static_cast<uint8_t*>(out), act_row_bytes(n_cols),
                                                   format == InputFormat::Q8x2);
    } else {
        // A few rows (decode) spread over chunks of 256 columns; many (a prompt) fill the GPU a row a block.
        const int64_t chunks = n_tok >= kWholeRows ? 1 : (n_cols + kRowThreads - 1) / kRowThreads;
        row_input_kernel<<<dim3(static_cast<unsigned>(n_tok), static_cast<unsigned>(chunks)), kRowThreads, 0, s.get()>>>(
            x, tf, n_cols, format, out, act_row_bytes(n_cols));
    }
    cuda_check_launch("prepare_input");
}

uint64_t quantized_acts_bytes(int64_t n_tok, int64_t n_cols) { return input_bytes(InputFormat::Q8x2, n_tok, n_cols); }

void quantize_acts(const float* x, int64_t n_tok, int64_t n_cols, bool two_level, void* out, CudaStream& s) {
    prepare_input(x, {}, n_tok, n_cols, two_level ? InputFormat::Q8x2 : InputFormat::Q8, out, s);
}

}  // namespace strata::gpu
