#pragma once
// Which (layer, expert) pairs the expert cache's slots hold, and which one leaves when a
// chosen expert is missing. Two policies: least recently used, and frequency-weighted (the
// expert chosen least often leaves, recency breaking ties). Frequencies count every choice
// of every expert, held or not, and may start from saved routing statistics, so an expert
// that is often chosen stays once read, and one seldom chosen passes through the slot of the
// last such expert. Pure bookkeeping: no memory, no I/O (runtime/weights/expert_cache does them).
#include <cstdint>
#include <string_view>
#include <vector>

namespace strata::runtime {

enum class ExpertPolicy { Frequency, Lru };
std::string_view expert_policy_name(ExpertPolicy p);  // "frequency", "lru"
// Throws UsageError naming the accepted names.
ExpertPolicy parse_expert_policy(std::string_view name);

class ExpertSlots {
public:
    ExpertSlots(int n_layer, int n_expert, int n_slots, ExpertPolicy policy);

    int n_slots() const { return static_cast<int>(key_.size()); }
    // Frequencies start at counts[layer][expert] (saved routing statistics), halved until
    // the largest is below the aging bound, so what this run chooses soon weighs as much.
    void seed(const std::vector<std::vector<uint64_t>>& counts);
    // The slot holding expert e of layer il, or -1.
    int find(int il, int e) const;
    // Counts one choice of expert e of layer il (held or not) for the policy.
    void touch(int il, int e);
    // A slot for expert e of layer il (not held): a free one, else the policy's victim among
    // the unpinned; the slot is pinned. Returns -1 when every slot is pinned.
    int assign(int il, int e);
    // Pinned slots are not given away: those a pass is using.
    void pin(int slot) { pinned_[slot] = 1; }
    void unpin_all();
    // Empties a slot (its read failed).
    void drop(int slot);
    // The (layer, expert) key a slot holds (-1: free): layer * n_expert + expert.
    int64_t key(int slot) const { return key_[slot]; }

private:
    // Whether slot a should leave before slot b.
    bool colder(int a, int b) const;
    void age();

    int n_expert_;
    ExpertPolicy policy_;
    std::vector<int64_t> key_;          // per slot
    std::vector<uint64_t> last_use_;    // per slot: the clock at its last touch
    std::vector<uint8_t> pinned_;       // per slot
    std::vector<int32_t> where_;        // per key: its slot or -1
    std::vector<uint32_t> freq_;        // per key: choices counted (aged)
    uint64_t clock_ = 0;
};

}  // namespace strata::runtime
