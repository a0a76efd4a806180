#pragma once
// Page-locks the storage tier's pinned pools for the GPU (cudaHostRegister), so H2D copies
// from them run at full PCIe speed and asynchronously. storage/ calls this through its
// HostPinner hook and never includes CUDA.
namespace strata::gpu {

// Installs the CUDA pinner as storage's default HostPinner when a device is present.
// Returns whether it did; without CUDA or a device, pools stay mlock'ed host memory.
bool install_cuda_host_pinner();

}  // namespace strata::gpu
