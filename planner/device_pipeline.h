#pragma once
// One decode step of a device plan in the order the device backend issues it
// (runtime/exec/device/layer_pipeline.h): every slot of the ring starts filling at the step's
// start, a slot's next copy is queued once the compute that reads it has been issued and waits
// for it, and every host-to-device copy goes through one link in the order it was queued. So a
// layer whose KV blocks come in from the host each step waits for the weights queued before
// them; the host itself waits for that layer's new rows to come down and its blocks to go up
// (a hop, during which it queues nothing), and for a CPU layer's hidden states. The cost model's
// streams overlap without such bounds; this is the step as it runs.
#include <vector>

namespace strata::planner {

struct DeviceLayerWork {
    enum class Site { Device, CopiedIn, Cpu };
    Site site = Site::Device;
    double compute_s = 0;  // the device's work for the layer (a CPU layer: the host's, its hop included)
    double copy_s = 0;     // its weights over the link (CopiedIn)
    bool host_waits_copy = false;  // the host waits for its copy (a layer streamed from disk: its buffer is reused)
    // The KV cache in the host's DRAM: the layer's new rows (or its queries) go down once the
    // device has done the part of compute_s `before_attention` (its norm and q, k, v), the host
    // works `host_s` (the CPU's attention), `kv_copy_s` of blocks come up over the link (the
    // device attending), and the device goes on once they are back.
    bool round_trip = false;
    double before_attention = 0.5;
    double host_s = 0;
    double kv_copy_s = 0;
};

// Seconds of one decode step: the layers in order through `n_slots` slots, `hop_s` for each round
// trip (the device's data down, the host's wait, data back up, the device's wait), `tail_s` after
// the last layer (the output head, the logits' hop and the step's own costs).
double device_pipeline_s(const std::vector<DeviceLayerWork>& layers, int n_slots, double hop_s, double tail_s);

}  // namespace strata::planner
