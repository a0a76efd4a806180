#pragma once
// The GPUs this process can use. Empty, with the reason, when CUDA was not built or no
// device/driver is present: the engine then runs on the CPU.
#include <cstddef>
#include <string>
#include <vector>

namespace strata::gpu {

struct DeviceInfo {
    int index = 0;
    std::string name;
    size_t total_bytes = 0;
    int sm_major = 0, sm_minor = 0;
};

struct DeviceList {
    std::vector<DeviceInfo> devices;
    std::string why_none;  // set when `devices` is empty
};

DeviceList list_devices();

}  // namespace strata::gpu
