#pragma once
// Which (layer, expert) pairs the expert cache's slots hold, and which one leaves when a
// chosen expert is missing. Three policies: least recently used; frequency-weighted (the
// expert chosen least often leaves, recency breaking ties; frequencies count every choice of
// every expert, held or not, and may start from saved routing statistics); and adaptive, the
// default, which plays every choice through two shadow tables of keys (what LRU and what the
// frequency rule would hold) and evicts by the rule whose shadow has had more hits lately.
// Routing with locality from token to token favours LRU, routing skewed to a few hot experts
// favours frequency; adaptive follows whichever this run's routing rewards. Pure bookkeeping:
// no memory, no I/O (runtime/weights/expert_cache does them).
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace strata::runtime {

enum class ExpertPolicy { Adaptive, Frequency, Lru };
std::string_view expert_policy_name(ExpertPolicy p);  // "adaptive", "frequency", "lru"
// Throws UsageError naming the accepted names.
ExpertPolicy parse_expert_policy(std::string_view name);

class ExpertSlots {
public:
    ExpertSlots(int n_layer, int n_expert, int n_slots, ExpertPolicy policy);

    int n_slots() const { return static_cast<int>(held_.key.size()); }
    // Frequencies start at counts[layer][expert] (saved routing statistics), halved until
    // the largest is below the aging bound, so what this run chooses soon weighs as much.
    void seed(const std::vector<std::vector<uint64_t>>& counts);
    // The slot holding expert e of layer il, or -1.
    int find(int il, int e) const { return held_.where[key_of(il, e)]; }
    // Counts one choice of expert e of layer il (held or not) for the policy.
    void touch(int il, int e);
    // A slot for expert e of layer il (not held): a free one, else the policy's victim among
    // the unpinned; the slot is pinned. Returns -1 when every slot is pinned.
    int assign(int il, int e);
    // Pinned slots are not given away: those a pass is using.
    void pin(int slot) { held_.pinned[slot] = 1; }
    void unpin_all();
    // Empties a slot (its read failed).
    void drop(int slot);
    // The (layer, expert) key a slot holds (-1: free): layer * n_expert + expert.
    int64_t key(int slot) const { return held_.key[slot]; }
    // The rule that picks victims now: the policy's, or for adaptive the leading shadow's.
    ExpertPolicy rule() const;

private:
    // Slots under one eviction rule: the cache's own, or a shadow holding keys only.
    struct Table {
        std::vector<int64_t> key;        // per slot (-1: free)
        std::vector<uint64_t> last_use;  // per slot: the clock at its last touch
        std::vector<uint8_t> pinned;     // per slot
        std::vector<int32_t> where;      // per key: its slot or -1
        Table(size_t n_slots, size_t n_keys);
        // The unpinned slot that leaves first under `rule`, or -1.
        int victim(ExpertPolicy rule, const std::vector<uint32_t>& freq) const;
        // Puts key k in slot s (pinned), emptying what it held.
        void place(int s, int64_t k, uint64_t clock);
        // Whether key k is held (then pinned and touched); else it takes the rule's victim.
        bool access(int64_t k, ExpertPolicy rule, const std::vector<uint32_t>& freq, uint64_t clock);
        void empty(int s);
    };

    int64_t key_of(int il, int e) const { return static_cast<int64_t>(il) * n_expert_ + e; }
    void age();

    int n_expert_;
    ExpertPolicy policy_;
    Table held_;
    std::vector<Table> shadows_;    // adaptive: [0] under LRU, [1] under frequency
    std::array<double, 2> recent_hits_{};  // adaptive: the shadows' hits, fading over a cache's worth of choices
    std::vector<uint32_t> freq_;    // per key: choices counted (aged)
    uint64_t clock_ = 0;
};

}  // namespace strata::runtime
