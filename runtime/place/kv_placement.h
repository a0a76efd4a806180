#pragma once
// Where the KV cache lives when a device computes the layers, and so who attends.
#include <string_view>

namespace strata::runtime {

enum class KvPlacement {
    Device,            // every layer's KV in device memory, attention on the GPU
    HostCpuAttention,  // KV in the host cache; the CPU attends (FastDecode/NEO): q, k, v go down, results up
    HostGpuAttention,  // KV in the host cache; each layer's blocks the pass reads are copied to the device
};

constexpr std::string_view kv_placement_name(KvPlacement p) {
    switch (p) {
        case KvPlacement::Device: return "device (GPU attention)";
        case KvPlacement::HostCpuAttention: return "host (CPU attention)";
        case KvPlacement::HostGpuAttention: return "host, copied in per layer (GPU attention)";
    }
    return "?";
}

}  // namespace strata::runtime
