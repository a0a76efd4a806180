#include "gpu/cuda_devices.h"
#include "gpu/cuda_host.h"

namespace strata::gpu {

bool install_cuda_host_pinner() { return false; }

DeviceList list_devices() { return {{}, "this build of strata has no CUDA backend (configure with -DSTRATA_CUDA=ON)"}; }

}  // namespace strata::gpu
