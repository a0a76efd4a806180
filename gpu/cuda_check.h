#pragma once
// CUDA error -> BackendError. Only for files in gpu/ that include CUDA headers.
#include <cuda_runtime.h>

#include <string>

#include "core/error.h"

namespace strata::gpu {

inline void cuda_check(cudaError_t err, const char* what) {
    if (err == cudaSuccess) return;
    throw BackendError(std::string("CUDA: ") + what + " failed: " + cudaGetErrorString(err),
                       "check that the GPU and its driver work (nvidia-smi), or run on the CPU");
}

// After a kernel launch: catches bad launch shapes at once (errors inside the kernel surface at
// the next synchronisation).
inline void cuda_check_launch(const char* kernel) { cuda_check(cudaGetLastError(), kernel); }

}  // namespace strata::gpu
