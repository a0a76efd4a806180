// Weight kernels: decode GEMV and dequantize-to-F16, both built on one decoder per GGUF type
// (byte-exact with the block layouts of cpu/quant_ref.h and the same arithmetic as its
// dequantize_row_ref), so the two kernels cannot disagree on what a weight is.
#include <cuda_fp16.h>

#include <string>

#include "gpu/cuda_check.h"
#include "gpu/cuda_kernels.h"

namespace strata::gpu {
namespace {

__device__ __forceinline__ float half_at(const uint8_t* p) {
    // Byte loads: blocks are 18, 20, 34 ... bytes, so their fields are not 4-byte aligned.
    return __half2float(__ushort_as_half(static_cast<unsigned short>(p[0] | p[1] << 8)));
}

// A decoder splits a row into items (a block, a K-quant sub-block or one F16 value) and calls
// f(column, value) for each value of an item. The lanes of a warp take consecutive items, so a
// warp reads a contiguous stretch of the row per step.
struct DecodeF16 {
    static constexpr int kItemValues = 1;
    template <class F>
    __device__ static void item(const uint8_t* row, int64_t i, F&& f) { f(i, half_at(row + 2 * i)); }
};
struct DecodeQ4_0 {  // 18 bytes: d, qs[16]; byte j holds value j (low nibble) and j+16 (high)
    static constexpr int kItemValues = 32;
    template <class F>
    __device__ static void item(const uint8_t* row, int64_t i, F&& f) {
        const uint8_t* b = row + 18 * i;
        const float d = half_at(b);
        for (int j = 0; j < 16; ++j) {
            const int q = b[2 + j];
            f(32 * i + j, d * float((q & 0xF) - 8));
            f(32 * i + j + 16, d * float((q >> 4) - 8));
        }
    }
};
struct DecodeQ4_1 {  // 20 bytes: d, m, qs[16]
    static constexpr int kItemValues = 32;
    template <class F>
    __device__ static void item(const uint8_t* row, int64_t i, F&& f) {
        const uint8_t* b = row + 20 * i;
        const float d = half_at(b), m = half_at(b + 2);
        for (int j = 0; j < 16; ++j) {
            const int q = b[4 + j];
            f(32 * i + j, d * float(q & 0xF) + m);
            f(32 * i + j + 16, d * float(q >> 4) + m);
        }
    }
};
struct DecodeQ8_0 {  // 34 bytes: d, qs[32] int8
    static constexpr int kItemValues = 32;
    template <class F>
    __device__ static void item(const uint8_t* row, int64_t i, F&& f) {
        const uint8_t* b = row + 34 * i;
        const float d = half_at(b);
        for (int j = 0; j < 32; ++j) f(32 * i + j, d * float(static_cast<int8_t>(b[2 + j])));
    }
};
// Q4_K, 144 bytes: d, dmin, scales[12] (6-bit scale and min per sub-block), qs[128]. Item =
// sub-block j of 32 values: nibble (j & 1) of bytes qs[32 (j / 2) ..+32].
struct DecodeQ4_K {
    static constexpr int kItemValues = 32;
    template <class F>
    __device__ static void item(const uint8_t* row, int64_t item, F&& f) {
        const int64_t i = item / 8;
        const int j = static_cast<int>(item % 8);
        const uint8_t* b = row + 144 * i;
        const uint8_t* sc = b + 4;
        int s, m;  // cpu::k4_scale_min
        if (j < 4) {
            s = sc[j] & 63;
            m = sc[j + 4] & 63;
        } else {
            s = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4);
            m = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
        }
        const float d = half_at(b) * float(s), dm = half_at(b + 2) * float(m);
        const uint8_t* q = b + 16 + 32 * (j / 2);
        for (int l = 0; l < 32; ++l) f(256 * i + 32 * j + l, d * float((j & 1) ? q[l] >> 4 : q[l] & 0xF) - dm);
    }
};
// Q6_K, 210 bytes: ql[128], qh[64], scales[16] int8, d. Item = group g of 16 values (one scale).
// Value k: half h = k/128, r = k%128, quarter s = r/32, l = r%32; low 4 bits from
// ql[64h + l + 32(s&1)] (nibble s>>1), high 2 bits from qh[32h + l] >> 2s; minus 32.
struct DecodeQ6_K {
    static constexpr int kItemValues = 16;
    template <class F>
    __device__ static void item(const uint8_t* row, int64_t item, F&& f) {
        const int64_t i = item / 16;
        const int g = static_cast<int>(item % 16);
        const uint8_t* b = row + 210 * i;
        const float d = half_at(b + 208) * float(static_cast<int8_t>(b[192 + g]));
        for (int t = 0; t < 16; ++t) {
            const int k = 16 * g + t, h = k / 128, r = k % 128, s = r / 32, l = r % 32;
            const int ql = b[64 * h + l + 32 * (s & 1)];
            const int lo = (s >> 1) ? (ql >> 4) : (ql & 0xF);
            const int hi = (b[128 + 32 * h + l] >> (2 * s)) & 3;
            f(256 * i + k, d * float((lo | hi << 4) - 32));
        }
    }
};

// Launch shape of both kernels: 128 threads = 4 warps per block, one warp per weight row
// (grid = n_rows / 4 rounded up). Lane l decodes items l, l + 32, ... of its row.
constexpr int kWarpsPerBlock = 4;

template <class D>
__global__ void gemv_kernel(const uint8_t* w, size_t row_bytes, const float* x, float* y, int64_t n_rows,
                            int64_t n_items) {
    const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= n_rows) return;  // a whole warp leaves together
    const uint8_t* row = w + r * row_bytes;
    float acc = 0.0f;
    for (int64_t i = lane; i < n_items; i += 32) D::item(row, i, [&](int64_t k, float v) { acc += v * x[k]; });
    for (int o = 16; o > 0; o /= 2) acc += __shfl_xor_sync(0xFFFFFFFFu, acc, o);
    if (lane == 0) y[r] = acc;
}

template <class D>
__global__ void dequantize_f16_kernel(const uint8_t* w, size_t row_bytes, __half* out, int64_t n_rows,
                                      int64_t n_cols, int64_t n_items) {
    const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
    if (r >= n_rows) return;
    const uint8_t* row = w + r * row_bytes;
    __half* dst = out + r * n_cols;
    for (int64_t i = threadIdx.x % 32; i < n_items; i += 32)
        D::item(row, i, [&](int64_t k, float v) { dst[k] = __float2half_rn(v); });
}

// One thread per value, 256 per block.
__global__ void f32_to_f16_kernel(const float* x, __half* out, int64_t n) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __float2half_rn(x[i]);
}

unsigned row_blocks(int64_t n_rows) { return static_cast<unsigned>((n_rows + kWarpsPerBlock - 1) / kWarpsPerBlock); }

// Calls fn(decoder) with the decoder of `type`.
template <class Fn>
void with_decoder(DType type, Fn&& fn) {
    switch (type) {
        case DType::F16: return fn(DecodeF16{});
        case DType::Q4_0: return fn(DecodeQ4_0{});
        case DType::Q4_1: return fn(DecodeQ4_1{});
        case DType::Q8_0: return fn(DecodeQ8_0{});
        case DType::Q4_K: return fn(DecodeQ4_K{});
        case DType::Q6_K: return fn(DecodeQ6_K{});
        default:
            throw BackendError("gpu: no kernel for weight type " + std::string(dtype_name(type)),
                               "GPU weight types: f16, q4_0, q4_1, q8_0, q4_k, q6_k; run this model on the CPU");
    }
}

}  // namespace

bool gpu_weight_type(DType t) {
    return t == DType::F16 || t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q8_0 || t == DType::Q4_K ||
           t == DType::Q6_K;
}

void gemv(DType type, const void* w, const float* x, float* y, int64_t n_rows, int64_t n_cols, CudaStream& s) {
    with_decoder(type, [&](auto decoder) {
        using D = decltype(decoder);
        STRATA_ASSERT(n_cols % traits(type).block_elems == 0);
        if (n_rows == 0) return;
        gemv_kernel<D><<<row_blocks(n_rows), 32 * kWarpsPerBlock, 0, s.get()>>>(
            static_cast<const uint8_t*>(w), row_bytes(type, n_cols), x, y, n_rows, n_cols / D::kItemValues);
        cuda_check_launch("gemv");
    });
}

void dequantize_f16(DType type, const void* w, uint16_t* out, int64_t n_rows, int64_t n_cols, CudaStream& s) {
    with_decoder(type, [&](auto decoder) {
        using D = decltype(decoder);
        STRATA_ASSERT(n_cols % traits(type).block_elems == 0);
        if (n_rows == 0) return;
        dequantize_f16_kernel<D><<<row_blocks(n_rows), 32 * kWarpsPerBlock, 0, s.get()>>>(
            static_cast<const uint8_t*>(w), row_bytes(type, n_cols), reinterpret_cast<__half*>(out), n_rows, n_cols,
            n_cols / D::kItemValues);
        cuda_check_launch("dequantize_f16");
    });
}

void convert_f32_to_f16(const float* x, uint16_t* out, int64_t n, CudaStream& s) {
    if (n == 0) return;
    f32_to_f16_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s.get()>>>(x, reinterpret_cast<__half*>(out), n);
    cuda_check_launch("convert_f32_to_f16");
}

}  // namespace strata::gpu
