#include "runtime/exec/device/layer_pipeline.h"

#include <algorithm>
#include <deque>

#include "core/error.h"

namespace strata::runtime {

std::vector<PipelineStep> layer_schedule(std::span<const LayerWork> layers, int n_slots) {
    STRATA_ASSERT(n_slots >= 1);
    const int n = static_cast<int>(layers.size());
    std::vector<int> copied;  // layers copied in, in order
    for (int l = 0; l < n; ++l)
        if (layers[l].site == LayerSite::CopiedIn) copied.push_back(l);
    std::vector<PipelineStep> steps;
    std::vector<int> slot_of(n, -1);
    std::deque<int> free_slots;
    size_t next_copy = 0;  // index into `copied` of the next layer to copy
    int computed = 0;      // layers [0, computed) have their compute issued
    // A streamed copy waits until every streamed CPU layer below it has run (stream order).
    auto may_copy = [&](int l) {
        if (layers[l].host_built && computed < l - n_slots + 1) return false;
        if (!layers[l].streamed) return true;
        for (int c = computed; c < l; ++c)
            if (layers[c].site == LayerSite::Cpu && layers[c].streamed) return false;
        return true;
    };
    auto fill_slots = [&] {
        while (!free_slots.empty() && next_copy < copied.size() && may_copy(copied[next_copy])) {
            const int l = copied[next_copy++];
            slot_of[l] = free_slots.front();
            free_slots.pop_front();
            steps.push_back({PipelineStep::Copy, l, slot_of[l]});
        }
    };
    // Every slot starts filling at once, ahead of the resident layers' compute.
    for (int s = 0; s < n_slots; ++s) free_slots.push_back(s);
    fill_slots();
    for (int l = 0; l < n; ++l) {
        const bool on_cpu = layers[l].site == LayerSite::Cpu;
        steps.push_back({on_cpu ? PipelineStep::CpuCompute : PipelineStep::Compute, l, slot_of[l]});
        computed = l + 1;
        // Its slot takes the next copied layer as soon as this compute is done with it.
        if (slot_of[l] >= 0) free_slots.push_back(slot_of[l]);
        fill_slots();
    }
    return steps;
}

std::vector<LayerWork> op_offloaded(std::span<const LayerWork> layers, const std::vector<bool>& keep_on_cpu) {
    std::vector<LayerWork> out(layers.begin(), layers.end());
    for (size_t l = 0; l < out.size(); ++l)
        if (out[l].site == LayerSite::Cpu && !(l < keep_on_cpu.size() && keep_on_cpu[l])) {
            out[l].site = LayerSite::CopiedIn;
            out[l].host_built = !out[l].streamed;
        }
    return out;
}

}  // namespace strata::runtime
