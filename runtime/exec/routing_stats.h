#pragma once
// How often the router of each mixture-of-experts layer chose each expert, counted by the
// CPU forward pass since the engine started: printed by `strata bench`, for /metrics too.
#include <cstdint>
#include <mutex>
#include <vector>

namespace strata::runtime {

class RoutingStats {
public:
    RoutingStats(int n_layer, int n_expert) : n_expert_(n_expert), counts_(static_cast<size_t>(n_layer) * n_expert, 0) {}

    int n_layer() const { return n_expert_ ? static_cast<int>(counts_.size() / n_expert_) : 0; }
    int n_expert() const { return n_expert_; }
    // Adds `n` tokens routed to expert e of layer il.
    void add(int il, int e, uint64_t n) {
        std::lock_guard lock(mu_);
        counts_[static_cast<size_t>(il) * n_expert_ + e] += n;
    }
    // The counts so far, [layer][expert].
    std::vector<std::vector<uint64_t>> snapshot() const {
        std::lock_guard lock(mu_);
        std::vector<std::vector<uint64_t>> out(static_cast<size_t>(n_layer()));
        for (size_t il = 0; il < out.size(); ++il)
            out[il].assign(counts_.begin() + il * n_expert_, counts_.begin() + (il + 1) * n_expert_);
        return out;
    }

    // The counts so far into `out`, flat (layer-major), and back to such a copy: a pass that is
    // run again counts once. Cheap enough for every pass: one copy into a buffer kept.
    void save(std::vector<uint64_t>& out) const {
        std::lock_guard lock(mu_);
        out = counts_;
    }
    void restore(const std::vector<uint64_t>& saved) {
        std::lock_guard lock(mu_);
        counts_ = saved;
    }

    // `part` of the choices in `counts` (a snapshot, or the difference of two), as a share; 0 for none.
    static double share(uint64_t part, const std::vector<std::vector<uint64_t>>& counts) {
        uint64_t all = 0;
        for (const auto& layer : counts)
            for (uint64_t c : layer) all += c;
        return all ? double(part) / double(all) : 0;
    }

private:
    int n_expert_;
    mutable std::mutex mu_;
    std::vector<uint64_t> counts_;
};

}  // namespace strata::runtime
