#pragma once
// Page-locks the storage tier's pinned pools for the GPU (cudaHostRegister), so H2D copies
// from them run at full PCIe speed and asynchronously. storage/ calls this through its
// HostPinner hook and never includes CUDA.
#include <cstddef>

namespace strata::gpu {

// Installs the CUDA pinner as storage's default HostPinner when a device is present.
// Returns whether it did; without CUDA or a device, pools stay mlock'ed host memory.
bool install_cuda_host_pinner();

// Whether [p, p + bytes) lies in memory the pinner registered and a kernel on the current
// device may read it at its host address (unified addressing maps registered memory).
bool host_mapped(const void* p, size_t bytes);

}  // namespace strata::gpu
