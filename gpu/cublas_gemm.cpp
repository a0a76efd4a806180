#include <cublas_v2.h>

#include <string>

#include "gpu/cuda_kernels.h"
#include "runtime/core/error.h"

namespace strata::gpu {
namespace {
void cublas_check(cublasStatus_t st, const char* what) {
    if (st == CUBLAS_STATUS_SUCCESS) return;
    throw BackendError(std::string("cuBLAS: ") + what + " failed: " + cublasGetStatusString(st),
                       "check that the GPU and its driver work (nvidia-smi), or run on the CPU");
}
cublasHandle_t handle_of(void* h) { return static_cast<cublasHandle_t>(h); }
}  // namespace

Cublas::Cublas() {
    cublasHandle_t h = nullptr;
    cublas_check(cublasCreate(&h), "cublasCreate");
    handle_ = h;
}

Cublas::~Cublas() { cublasDestroy(handle_of(handle_)); }

void Cublas::gemm_f16(const uint16_t* w, const uint16_t* x, float* y, int64_t n_rows, int64_t n_cols, int64_t n_tok,
                      Stream& s) {
    STRATA_ASSERT(n_rows <= INT32_MAX && n_cols <= INT32_MAX && n_tok <= INT32_MAX);
    cublas_check(cublasSetStream(handle_of(handle_), s.get()), "cublasSetStream");
    // cuBLAS is column-major: row-major w (n_rows x n_cols) is column-major n_cols x n_rows, so
    // y^T (n_rows x n_tok, column-major = y row-major) = op_T(w) * x^T with every leading
    // dimension the row length.
    const float one = 1.0f, zero = 0.0f;
    const int m = static_cast<int>(n_rows), n = static_cast<int>(n_tok), k = static_cast<int>(n_cols);
    cublas_check(cublasGemmEx(handle_of(handle_), CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, w, CUDA_R_16F, k, x,
                              CUDA_R_16F, k, &zero, y, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
}

}  // namespace strata::gpu
