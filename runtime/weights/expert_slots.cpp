#include "runtime/weights/expert_slots.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"

namespace strata::runtime {

namespace {
// Frequencies are halved when one reaches this: old choices fade, counters never overflow.
constexpr uint32_t kAgingBound = 1u << 16;
constexpr ExpertPolicy kShadowRules[2] = {ExpertPolicy::Lru, ExpertPolicy::Frequency};
}  // namespace

std::string_view expert_policy_name(ExpertPolicy p) {
    switch (p) {
        case ExpertPolicy::Adaptive: return "adaptive";
        case ExpertPolicy::Frequency: return "frequency";
        case ExpertPolicy::Lru: return "lru";
    }
    return "?";
}

ExpertPolicy parse_expert_policy(std::string_view name) {
    for (ExpertPolicy p : {ExpertPolicy::Adaptive, ExpertPolicy::Frequency, ExpertPolicy::Lru})
        if (name == expert_policy_name(p)) return p;
    throw UsageError(fmt::format("unknown expert cache policy '{}'", name),
                     "use --expert-policy adaptive, frequency or lru");
}

ExpertSlots::Table::Table(size_t n_slots, size_t n_keys)
    : key(n_slots, -1), last_use(n_slots, 0), pinned(n_slots, 0), where(n_keys, -1) {}

int ExpertSlots::Table::victim(ExpertPolicy rule, const std::vector<uint32_t>& freq) const {
    auto colder = [&](int a, int b) {
        if (key[a] < 0 || key[b] < 0) return key[a] < 0 && key[b] >= 0;  // a free slot first
        if (rule == ExpertPolicy::Frequency && freq[key[a]] != freq[key[b]]) return freq[key[a]] < freq[key[b]];
        return last_use[a] < last_use[b];
    };
    int v = -1;
    for (int s = 0; s < static_cast<int>(key.size()); ++s)
        if (!pinned[s] && (v < 0 || colder(s, v))) v = s;
    return v;
}

void ExpertSlots::Table::place(int s, int64_t k, uint64_t clock) {
    if (key[s] >= 0) where[key[s]] = -1;
    key[s] = k;
    where[k] = s;
    last_use[s] = clock;
    pinned[s] = 1;
}

bool ExpertSlots::Table::access(int64_t k, ExpertPolicy rule, const std::vector<uint32_t>& freq, uint64_t clock) {
    if (const int s = where[k]; s >= 0) {
        last_use[s] = clock;
        pinned[s] = 1;
        return true;
    }
    if (const int s = victim(rule, freq); s >= 0) place(s, k, clock);
    return false;
}

void ExpertSlots::Table::empty(int s) {
    if (key[s] >= 0) where[key[s]] = -1;
    key[s] = -1;
    pinned[s] = 0;
}

ExpertSlots::ExpertSlots(int n_layer, int n_expert, int n_slots, ExpertPolicy policy)
    : n_expert_(n_expert), policy_(policy), held_(n_slots, size_t(n_layer) * n_expert), freq_(held_.where.size(), 0) {
    if (policy == ExpertPolicy::Adaptive) shadows_.assign(2, held_);
}

void ExpertSlots::seed(const std::vector<std::vector<uint64_t>>& counts) {
    uint64_t top = 0;
    for (const auto& layer : counts)
        for (uint64_t c : layer) top = std::max(top, c);
    int shift = 0;
    while ((top >> shift) >= kAgingBound / 2) ++shift;
    for (size_t il = 0; il < counts.size() && (il + 1) * n_expert_ <= freq_.size(); ++il)
        for (size_t e = 0; e < counts[il].size() && e < static_cast<size_t>(n_expert_); ++e)
            freq_[il * n_expert_ + e] = static_cast<uint32_t>(counts[il][e] >> shift);
}

void ExpertSlots::touch(int il, int e) {
    const int64_t k = key_of(il, e);
    ++clock_;
    if (++freq_[k] >= kAgingBound) age();
    if (const int s = held_.where[k]; s >= 0) held_.last_use[s] = clock_;
    // A shadow's hit weighs 1 now and fades by e after a cache's worth of choices.
    const double fade = 1.0 - 1.0 / std::max(1, n_slots());
    for (size_t r = 0; r < shadows_.size(); ++r)
        recent_hits_[r] = recent_hits_[r] * fade + (shadows_[r].access(k, kShadowRules[r], freq_, clock_) ? 1 : 0);
}

void ExpertSlots::age() {
    for (uint32_t& f : freq_) f /= 2;
}

ExpertPolicy ExpertSlots::rule() const {
    if (policy_ != ExpertPolicy::Adaptive) return policy_;
    return recent_hits_[1] > recent_hits_[0] ? ExpertPolicy::Frequency : ExpertPolicy::Lru;
}

int ExpertSlots::assign(int il, int e) {
    const int v = held_.victim(rule(), freq_);
    if (v >= 0) held_.place(v, key_of(il, e), clock_);
    return v;
}

void ExpertSlots::drop(int slot) { held_.empty(slot); }

void ExpertSlots::unpin_all() {
    std::fill(held_.pinned.begin(), held_.pinned.end(), 0);
    for (Table& t : shadows_) std::fill(t.pinned.begin(), t.pinned.end(), 0);
}

}  // namespace strata::runtime
