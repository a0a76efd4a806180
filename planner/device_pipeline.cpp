#include "planner/device_pipeline.h"

#include <algorithm>
#include <cstddef>
#include <deque>

namespace strata::planner {

double device_pipeline_s(const std::vector<DeviceLayerWork>& layers, int n_slots, double hop_s, double tail_s) {
    using Site = DeviceLayerWork::Site;
    const size_t n = layers.size();
    std::vector<size_t> copied;
    for (size_t l = 0; l < n; ++l)
        if (layers[l].site == Site::CopiedIn) copied.push_back(l);
    // When each is free again: the host (it queues work, and waits where the runtime waits), the
    // compute stream, the link, each slot (its last reader computed).
    double host = 0, device = 0, link = 0;
    std::vector<double> slot_free(static_cast<size_t>(std::max(1, n_slots)), 0), copy_end(n, 0);
    std::vector<int> slot_of(n, -1);
    std::deque<int> free_slots;
    for (int s = 0; s < static_cast<int>(slot_free.size()); ++s) free_slots.push_back(s);
    size_t next_copy = 0;
    auto fill_slots = [&] {
        while (!free_slots.empty() && next_copy < copied.size()) {
            const size_t l = copied[next_copy++];
            const int s = free_slots.front();
            free_slots.pop_front();
            slot_of[l] = s;
            link = copy_end[l] = std::max({link, slot_free[static_cast<size_t>(s)], host}) + layers[l].copy_s;
            if (layers[l].host_waits_copy) host = copy_end[l];
        }
    };
    fill_slots();
    for (size_t l = 0; l < n; ++l) {
        const DeviceLayerWork& w = layers[l];
        if (w.site == Site::Cpu) {
            // The hidden states come down once the device is done, and go back up after.
            host = device = std::max(host, device) + w.compute_s;
        } else {
            const double start = std::max(device, copy_end[l]);
            if (w.round_trip) {
                // The host waits for the rows, works, queues the blocks behind whatever the link
                // has queued and waits for them; meanwhile it queues nothing.
                const double rows_down = start + w.before_attention * w.compute_s + hop_s / 2;
                host = std::max(host, rows_down) + w.host_s;
                if (w.kv_copy_s > 0) host = link = std::max(link, host) + w.kv_copy_s;
                device = host + hop_s / 2 + (1 - w.before_attention) * w.compute_s;
            } else {
                device = start + w.compute_s;
            }
            if (slot_of[l] >= 0) {
                slot_free[static_cast<size_t>(slot_of[l])] = device;
                free_slots.push_back(slot_of[l]);
            }
        }
        fill_slots();
    }
    return std::max(host, device) + tail_s;
}

}  // namespace strata::planner
