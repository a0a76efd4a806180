#pragma once
// The order in which a device pass issues its work when some layers' weights stay on the
// device, others come in from host memory each pass through a ring of device slots (a double
// buffer with two), and others run their matmuls on the CPU. A Copy puts a layer's weights into
// a slot once the Compute that last used the slot has finished; a Compute waits for its layer's
// Copy; a CpuCompute takes the hidden states down to the host and back. Issued in this order on
// the copy and compute streams, with one event per dependency, the copy of a layer overlaps the
// compute of the layers before it; the copies of the first copied layers overlap the
// device-resident layers' compute. (A mixture of experts' host waits inside each Compute for
// the device's experts: its device backend makes the Copy steps before a Compute while it waits
// there, DeviceBackend::Impl::run_schedule.)
#include <span>
#include <vector>

namespace strata::runtime {

// Where a layer runs in a device pass.
enum class LayerSite {
    Device,    // weights kept on the device
    CopiedIn,  // weights copied into a device slot each pass (from DRAM, or streamed from NVMe)
    Cpu,       // matmuls on the CPU, weights in DRAM or streamed from NVMe
};
struct LayerWork {
    LayerSite site = LayerSite::Device;
    // Its weights come from the host's weight stream, which hands streamed layers out in layer
    // order, one at a time: a Copy or CpuCompute of a streamed layer never comes before one of
    // a streamed layer below it.
    bool streamed = false;
    // Its copy is the host's work first (op offload rebuilds a CPU layer from the tiles it holds
    // in DRAM): issued no sooner than n_slots layers ahead of its compute, so that the device has
    // the layers before it queued while the host builds it, rather than waiting at a pass's
    // start for every slot's.
    bool host_built = false;
};

struct PipelineStep {
    enum Kind { Copy, Compute, CpuCompute };
    Kind kind = Compute;
    int layer = 0;
    int slot = -1;  // the device slot holding the layer's weights; -1: on the device, or a CPU layer
    bool operator==(const PipelineStep&) const = default;
};

// Layers are computed in order, copied ones copied in that order too. n_slots >= 1.
std::vector<PipelineStep> layer_schedule(std::span<const LayerWork> layers, int n_slots);

// The same layers with every CPU layer copied in instead (op offload: a long prompt's pass
// computes them on the device), each still read from where it lies (DRAM, or the stream; one in
// DRAM host_built), except those `keep_on_cpu` names (layers whose KV the host rebuilds from
// hidden states it saves).
std::vector<LayerWork> op_offloaded(std::span<const LayerWork> layers, const std::vector<bool>& keep_on_cpu);

}  // namespace strata::runtime
