#include "runtime/exec/layer_pipeline.h"

#include <algorithm>

#include "core/error.h"

namespace strata::runtime {

std::vector<PipelineStep> layer_schedule(const std::vector<bool>& on_device, int n_slots) {
    STRATA_ASSERT(n_slots >= 1);
    std::vector<int> streamed;
    for (int l = 0; l < static_cast<int>(on_device.size()); ++l)
        if (!on_device[l]) streamed.push_back(l);
    std::vector<PipelineStep> steps;
    std::vector<int> slot_of(on_device.size(), -1);
    size_t next_copy = 0;  // index into `streamed` of the next layer to copy
    auto copy_next = [&](int slot) {
        if (next_copy == streamed.size()) return;
        const int l = streamed[next_copy++];
        slot_of[l] = slot;
        steps.push_back({PipelineStep::Copy, l, slot});
    };
    // Every slot starts filling at once, ahead of the resident layers' compute.
    for (int s = 0; s < std::min<int>(n_slots, static_cast<int>(streamed.size())); ++s) copy_next(s);
    for (int l = 0; l < static_cast<int>(on_device.size()); ++l) {
        steps.push_back({PipelineStep::Compute, l, slot_of[l]});
        // Its slot takes the next streamed layer as soon as this compute is done with it.
        if (slot_of[l] >= 0) copy_next(slot_of[l]);
    }
    return steps;
}

}  // namespace strata::runtime
