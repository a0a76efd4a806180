#pragma once
// Where the routed experts of a mixture of experts go when they are placed apart from their
// layers: the rest of each layer (attention, norms, router, shared experts) stays resident;
// with expert offload the routed experts live on NVMe with a bounded cache of them in DRAM
// that keeps the most chosen; with a device, the most chosen of all may be held in device
// memory and computed there. Part of a Plan (plan.h); made by expert_placement.h.
#include <cstdint>
#include <string>
#include <vector>

namespace strata::planner {

struct ExpertPlan {
    bool enabled = false;
    int32_t n_expert = 0;  // routed experts per layer (what `dram` and `device` choose among)
    // The routing the prediction assumes: "measured: FILE (N tokens)", or "uniform (...)" saying why.
    std::string routing;
    int32_t cache_slots = 0;             // experts the DRAM cache holds
    uint64_t slot_bytes = 0;             // one expert's three matrices as read
    double hit_rate = 0;                 // expected share of a decode token's chosen experts found in DRAM
    double active_bytes_per_token = 0;   // weights one decode token reads (every dense tensor, its experts)
    double nvme_bytes_per_token = 0;     // of them, the expected misses read from NVMe
    // Per layer: the experts expected in the DRAM cache, most chosen first; the others stay on NVMe.
    std::vector<std::vector<int32_t>> dram;
    // A device runs every layer's attention (its norms and KV cache too); the CPU runs each
    // layer's feed-forward on the hidden states copied down and back up (expert_device.cpp).
    // Set with or without offloaded experts (`enabled`).
    bool attention_on_gpu = false;
    bool kv_on_gpu = true;  // with attention_on_gpu: the KV cache there too, else in DRAM
    // Per layer (empty: none): the routed experts held in device memory and computed there on
    // the rows routed to them, and the expected share of the layer's choices they take. They
    // are not read through the DRAM cache (`dram` and `hit_rate` are over the other experts).
    std::vector<std::vector<int32_t>> device;
    std::vector<double> device_share;
    double device_bytes_per_token = 0;  // of active_bytes_per_token: read by the device
    // With attention_on_gpu: prompts' passes of at least this many rows copy the layers whose
    // experts are in DRAM to the device and compute them there (op offload, planner/op_offload.h),
    // through two slots the held experts leave room for; 0: none.
    int32_t op_offload_rows = 0;

    bool has_device() const;
    int32_t n_device() const;  // experts held on the device, every layer together
    double device_share_of(int il) const;
    double device_share_mean() const;  // over the layers: the share of a token's choices
    bool operator==(const ExpertPlan&) const = default;
};

}  // namespace strata::planner
