#pragma once
// The order in which a GPU pass issues its work when some layers' weights stay on the device
// and the others come in from host memory each pass through a ring of device slots (a double
// buffer with two). A Copy puts a layer's weights into a slot once the Compute that last used
// the slot has finished; a Compute waits for its layer's Copy. Issued in this order on the
// copy and compute streams, with one event per dependency, the copy of a layer overlaps the
// compute of the layers before it; the copies of the first streamed layers overlap the
// device-resident layers' compute.
#include <vector>

namespace strata::runtime {

struct PipelineStep {
    enum Kind { Copy, Compute };
    Kind kind = Compute;
    int layer = 0;
    int slot = -1;  // the device slot holding the layer's weights; -1: resident on the device
    bool operator==(const PipelineStep&) const = default;
};

// on_device[l]: layer l's weights stay on the device. Layers are computed in order, streamed
// ones copied in that order too (the host's weight stream hands them out in order). n_slots >= 1.
std::vector<PipelineStep> layer_schedule(const std::vector<bool>& on_device, int n_slots);

}  // namespace strata::runtime
