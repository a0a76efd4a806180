#include "runtime/weights/expert_slots.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"

namespace strata::runtime {

namespace {
// Frequencies are halved when one reaches this: old choices fade, counters never overflow.
constexpr uint32_t kAgingBound = 1u << 16;
}  // namespace

std::string_view expert_policy_name(ExpertPolicy p) { return p == ExpertPolicy::Lru ? "lru" : "frequency"; }

ExpertPolicy parse_expert_policy(std::string_view name) {
    if (name == "frequency") return ExpertPolicy::Frequency;
    if (name == "lru") return ExpertPolicy::Lru;
    throw UsageError(fmt::format("unknown expert cache policy '{}'", name), "use --expert-policy frequency or lru");
}

ExpertSlots::ExpertSlots(int n_layer, int n_expert, int n_slots, ExpertPolicy policy)
    : n_expert_(n_expert), policy_(policy), key_(n_slots, -1), last_use_(n_slots, 0), pinned_(n_slots, 0),
      where_(static_cast<size_t>(n_layer) * n_expert, -1), freq_(where_.size(), 0) {}

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

int ExpertSlots::find(int il, int e) const { return where_[static_cast<size_t>(il) * n_expert_ + e]; }

void ExpertSlots::touch(int il, int e) {
    const size_t k = static_cast<size_t>(il) * n_expert_ + e;
    ++clock_;
    if (++freq_[k] >= kAgingBound) age();
    if (where_[k] >= 0) last_use_[where_[k]] = clock_;
}

void ExpertSlots::age() {
    for (uint32_t& f : freq_) f /= 2;
}

bool ExpertSlots::colder(int a, int b) const {
    if (key_[a] < 0 || key_[b] < 0) return key_[a] < 0 && key_[b] >= 0;  // a free slot first
    if (policy_ == ExpertPolicy::Frequency && freq_[key_[a]] != freq_[key_[b]]) return freq_[key_[a]] < freq_[key_[b]];
    return last_use_[a] < last_use_[b];
}

int ExpertSlots::assign(int il, int e) {
    int victim = -1;
    for (int s = 0; s < n_slots(); ++s)
        if (!pinned_[s] && (victim < 0 || colder(s, victim))) victim = s;
    if (victim < 0) return -1;
    if (key_[victim] >= 0) where_[key_[victim]] = -1;
    const int64_t k = static_cast<int64_t>(il) * n_expert_ + e;
    key_[victim] = k;
    where_[k] = victim;
    last_use_[victim] = clock_;
    pinned_[victim] = 1;
    return victim;
}

void ExpertSlots::drop(int slot) {
    if (key_[slot] >= 0) where_[key_[slot]] = -1;
    key_[slot] = -1;
    pinned_[slot] = 0;
}

void ExpertSlots::unpin_all() { std::fill(pinned_.begin(), pinned_.end(), 0); }

}  // namespace strata::runtime
