#pragma once
// One pass over the layers when the streamed ones come through a ring of a few buffers (the
// CPU runtime's runtime/weights/stream_ring): a layer's read may start once the previous read
// is done and its buffer is free again (the layer `slots` streamed layers earlier has been
// computed); a layer's compute starts once the previous layer's is done and its own read has
// landed. The cost model's streams overlap without such bounds: with few buffers, a run of
// streamed layers after a long run of resident ones cannot have been read ahead, and the pass
// takes longer than its busiest stream.
#include <vector>

namespace strata::planner {

// Seconds of one pass in the steady state (the ring wraps: the next pass's first streamed layers
// are read while this pass's last layers compute). compute[i] and read[i] per layer, read 0 for
// a resident layer; `tail` is computed after the last layer (output head, sampling).
double ring_pipeline_s(const std::vector<double>& compute, const std::vector<double>& read, double tail, int slots);

}  // namespace strata::planner
