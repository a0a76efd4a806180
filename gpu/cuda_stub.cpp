#include "gpu/cuda_devices.h"

namespace strata::gpu {

DeviceList list_devices() { return {{}, "this build of strata has no CUDA backend (configure with -DSTRATA_CUDA=ON)"}; }

}  // namespace strata::gpu
