// cuBLAS is opened with dlopen on first use: linked, its libraries' relocations cost every
// process about 160 MB of resident memory at start-up, GPU or not.
#include <cublas_v2.h>
#include <dlfcn.h>

#include <string>

#include "core/error.h"
#include "gpu/cuda_kernels.h"

namespace strata::gpu {
namespace {

struct CublasApi {
    decltype(&cublasCreate_v2) create = nullptr;
    decltype(&cublasDestroy_v2) destroy = nullptr;
    decltype(&cublasSetStream_v2) set_stream = nullptr;
    // cublasGemmEx is overloaded in C++: the C signature.
    cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*, const void*,
                              cudaDataType, int, const void*, cudaDataType, int, const void*, void*, cudaDataType, int,
                              cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
    decltype(&cublasGetStatusString) status_string = nullptr;

    static const CublasApi& get() {
        static const CublasApi api = load();
        return api;
    }

private:
    static CublasApi load() {
        const std::string name = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
        void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!lib)
            throw BackendError("cannot load " + name + ": " + dlerror(),
                               "install the CUDA toolkit's cuBLAS (or add its lib folder to LD_LIBRARY_PATH), or run on the CPU");
        CublasApi a;
        auto sym = [&](auto& fn, const char* s) {
            fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, s));
            if (!fn) throw BackendError(name + " has no " + s, "install a cuBLAS that matches this build's CUDA toolkit");
        };
        sym(a.create, "cublasCreate_v2");
        sym(a.destroy, "cublasDestroy_v2");
        sym(a.set_stream, "cublasSetStream_v2");
        sym(a.gemm_ex, "cublasGemmEx");
        sym(a.status_string, "cublasGetStatusString");
        return a;
    }
};

void cublas_check(cublasStatus_t st, const char* what) {
    if (st == CUBLAS_STATUS_SUCCESS) return;
    throw BackendError(std::string("cuBLAS: ") + what + " failed: " + CublasApi::get().status_string(st),
                       "check that the GPU and its driver work (nvidia-smi), or run on the CPU");
}
cublasHandle_t handle_of(void* h) { return static_cast<cublasHandle_t>(h); }
}  // namespace

Cublas::Cublas() {
    cublasHandle_t h = nullptr;
    cublas_check(CublasApi::get().create(&h), "cublasCreate");
    handle_ = h;
}

Cublas::~Cublas() { CublasApi::get().destroy(handle_of(handle_)); }

void Cublas::gemm(DType type, const void* w, const void* x, float* y, int64_t ldy, int64_t n_rows, int64_t n_cols,
                  int64_t n_tok, bool accumulate, CudaStream& s) {
    if (n_rows > INT32_MAX || n_cols > INT32_MAX || n_tok > INT32_MAX || ldy > INT32_MAX)
        throw BackendError("cuBLAS: a matmul dimension is over 2^31", "an internal error; please report it");
    const cudaDataType in = type == DType::F16 ? CUDA_R_16F : type == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F;
    const CublasApi& api = CublasApi::get();
    cublas_check(api.set_stream(handle_of(handle_), s.get()), "cublasSetStream");
    // cuBLAS is column-major: row-major w (n_rows x n_cols) is column-major n_cols x n_rows, so
    // y^T (n_rows x n_tok, column-major = y row-major with rows ldy apart) = op_T(w) * x^T.
    const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    const int m = static_cast<int>(n_rows), n = static_cast<int>(n_tok), k = static_cast<int>(n_cols);
    cublas_check(api.gemm_ex(handle_of(handle_), CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, w, in, k, x, in, k, &beta, y,
                              CUDA_R_32F, static_cast<int>(ldy), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
}

}  // namespace strata::gpu
