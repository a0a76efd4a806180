// The matmul of a weight matrix with rows of activations, choosing its kernel: the decode
// kernel (matvec) for up to kMatvecRows rows, reading the weights once for all of them; longer
// products of block-quantized weights on the tensor cores without expanding the weights
// (matmul_tiles) up to kExpandRows rows, and past that through cuBLAS over the weight rows
// expanded to half precision a chunk at a time; longer products of float weights through
// cuBLAS. The input, transformed and in the form that kernel reads, comes from prepare_input.
#include <algorithm>
#include <array>
#include <cstddef>

#include "core/error.h"
#include "gpu/cuda_kernels.h"
#include "gpu/kernels/block_types.h"

namespace strata::gpu {

bool gpu_weight_type(DType t) {
    return t == DType::F32 || t == DType::F16 || t == DType::BF16 || blocks::gpu_block_type(t);
}

InputFormat input_format(const WeightMatmul& m) {
    if (blocks::gpu_block_type(m.type)) {
        if (m.n_tok > kMatvecRows) return InputFormat::F16;
        return m.two_level_acts ? InputFormat::Q8x2 : InputFormat::Q8;
    }
    if (m.n_tok > kMatvecRows && m.type == DType::F16) return InputFormat::F16;
    if (m.n_tok > kMatvecRows && m.type == DType::BF16) return InputFormat::BF16;
    return m.in.any() ? InputFormat::F32 : InputFormat::Direct;
}

namespace {
// Where the expanded weight rows start in a product's scratch: after the input, aligned as
// cuBLAS reads fastest.
uint64_t expand_offset(int64_t n_tok, int64_t n_cols) { return (input_bytes(InputFormat::F16, n_tok, n_cols) + 255) & ~uint64_t{255}; }

bool expands(const WeightMatmul& m) { return blocks::gpu_block_type(m.type) && m.n_tok >= kExpandRows; }

// Chunk by chunk: the rows expanded into the scratch after the input, then one cuBLAS product
// writes their columns of y. The stream orders each chunk's product before the next expansion.
void expanded_matmul(const WeightMatmul& m, const void* x16, const std::function<Cublas&()>& blas, CudaStream& s) {
    auto* w16 = reinterpret_cast<uint16_t*>(static_cast<std::byte*>(const_cast<void*>(x16)) + expand_offset(m.n_tok, m.n_cols));
    const int64_t chunk = expand_chunk_rows(m.n_rows, m.n_cols);
    const size_t stride = row_bytes(m.type, m.n_cols);
    for (int64_t r0 = 0; r0 < m.n_rows; r0 += chunk) {
        const int64_t rows = std::min(chunk, m.n_rows - r0);
        dequantize_rows_f16(m.type, static_cast<const std::byte*>(m.w) + r0 * stride, rows, m.n_cols, w16, s);
        blas().gemm(DType::F16, w16, x16, m.y + r0, m.ldy, rows, m.n_cols, m.n_tok, m.accumulate, s);
    }
}
}  // namespace

int64_t expand_chunk_rows(int64_t n_rows, int64_t n_cols) {
    const int64_t fit = int64_t(kExpandBytes / (2 * uint64_t(n_cols))) / kExpandRowTile * kExpandRowTile;
    return std::min(n_rows, std::max(kExpandRowTile, fit));
}

uint64_t product_scratch_bytes(const WeightMatmul& m) {
    const InputFormat format = input_format(m);
    if (!expands(m)) return input_bytes(format, m.n_tok, m.n_cols);
    return expand_offset(m.n_tok, m.n_cols) + 2 * uint64_t(expand_chunk_rows(m.n_rows, m.n_cols)) * uint64_t(m.n_cols);
}

uint64_t max_product_scratch_bytes(int64_t max_rows, int64_t max_cols) {
    // The largest input form any product reads (float, for a transformed input of float weights,
    // is the largest), and past kExpandRows the largest chunk of expanded rows after it.
    uint64_t bytes = 0;
    for (const int64_t rows : {std::min(max_rows, kMatvecRows), max_rows})
        for (const InputFormat f : {InputFormat::Q8x2, InputFormat::F16, InputFormat::F32})
            bytes = std::max(bytes, input_bytes(f, rows, max_cols));
    if (max_rows < kExpandRows) return bytes;
    const uint64_t chunk = std::max(kExpandBytes, 2 * uint64_t(kExpandRowTile) * uint64_t(max_cols));
    return std::max(bytes, expand_offset(max_rows, max_cols) + chunk);
}

namespace {
void check_weights(const WeightMatmul& m) {
    if (!gpu_weight_type(m.type))
        throw BackendError("gpu: no matmul kernel for weight type " + std::string(dtype_name(m.type)),
                           "run this model on the CPU (--device cpu)");
    if (m.n_cols % traits(m.type).block_elems != 0)
        throw BackendError("gpu: a weight row of " + std::to_string(m.n_cols) + " values is not whole blocks of " +
                               std::string(dtype_name(m.type)),
                           "the model file is malformed; check it with strata inspect");
    if (blocks::gpu_block_type(m.type) && reinterpret_cast<uintptr_t>(m.w) % 16 != 0)
        throw BackendError("gpu: quantized weights must start 16-byte aligned", "an internal error; please report it");
}
}  // namespace

void matmul(std::span<const WeightMatmul> ms, const void* prepared, const std::function<Cublas&()>& blas, CudaStream& s) {
    std::array<WeightMatmul, kDeviceLaunchProducts> ps;  // the float kernels read the prepared input as their x
    STRATA_ASSERT(!ms.empty() && ms.size() <= ps.size());
    const WeightMatmul& m = ms[0];
    const InputFormat format = input_format(m);
    for (size_t i = 0; i < ms.size(); ++i) {
        check_weights(ms[i]);
        ps[i] = ms[i];
        if (format == InputFormat::F32) ps[i].x = static_cast<const float*>(prepared);
    }
    if (m.n_tok <= kMatvecRows) return matvec(std::span<const WeightMatmul>(ps.data(), ms.size()), prepared, s);
    STRATA_ASSERT(ms.size() == 1);  // longer products launch one weight at a time
    const WeightMatmul& p = ps[0];
    if (expands(m)) return expanded_matmul(m, prepared, blas, s);
    if (blocks::gpu_block_type(m.type)) return matmul_tiles(p, prepared, s);
    blas().gemm(m.type, m.w, format == InputFormat::Direct ? static_cast<const void*>(m.x) : prepared, m.y, m.ldy, m.n_rows,
              m.n_cols, m.n_tok, m.accumulate, s);
}

}  // namespace strata::gpu
