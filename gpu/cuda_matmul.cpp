// The matmul of a weight matrix with rows of activations, choosing its kernel: the decode
// kernel (matvec) for up to kMatvecRows rows, reading the weights once for all of them; longer
// products of block-quantized weights on the tensor cores without expanding the weights
// (matmul_tiles); longer products of float weights through cuBLAS. The input, transformed and
// in the form that kernel reads, comes from prepare_input.
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

void matmul(const WeightMatmul& m, const void* prepared, const std::function<Cublas&()>& blas, CudaStream& s) {
    if (!gpu_weight_type(m.type))
        throw BackendError("gpu: no matmul kernel for weight type " + std::string(dtype_name(m.type)),
                           "run this model on the CPU (--device cpu)");
    if (m.n_cols % traits(m.type).block_elems != 0)
        throw BackendError("gpu: a weight row of " + std::to_string(m.n_cols) + " values is not whole blocks of " +
                               std::string(dtype_name(m.type)),
                           "the model file is malformed; check it with strata inspect");
    const bool block = blocks::gpu_block_type(m.type);
    if (block && reinterpret_cast<uintptr_t>(m.w) % 16 != 0)
        throw BackendError("gpu: quantized weights must start 16-byte aligned", "an internal error; please report it");
    const InputFormat format = input_format(m);
    WeightMatmul p = m;  // the float kernels read the prepared input as their x
    if (format == InputFormat::F32) p.x = static_cast<const float*>(prepared);
    if (m.n_tok <= kMatvecRows) return matvec(p, prepared, s);
    if (block) return matmul_tiles(p, prepared, s);
    blas().gemm(m.type, m.w, format == InputFormat::Direct ? static_cast<const void*>(m.x) : prepared, m.y, m.ldy, m.n_rows,
              m.n_cols, m.n_tok, m.accumulate, s);
}

}  // namespace strata::gpu
