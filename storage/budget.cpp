#include "storage/budget.h"

#include <algorithm>
#include <fmt/format.h>
#include <limits>

#include "core/error.h"
#include "core/log.h"

namespace strata::storage {

MemoryBudget::MemoryBudget(std::string name, uint64_t limit, std::string flag)
    : name_(std::move(name)), flag_(std::move(flag)), limit_(limit) {}

bool MemoryBudget::try_reserve(uint64_t bytes) {
    uint64_t cur = used_.load(std::memory_order_relaxed);
    do {
        if (bytes > limit_ || cur > limit_ - bytes) return false;
    } while (!used_.compare_exchange_weak(cur, cur + bytes, std::memory_order_relaxed));
    // Peak is a monotone max of values `used_` really took.
    const uint64_t now = cur + bytes;
    uint64_t p = peak_.load(std::memory_order_relaxed);
    while (now > p && !peak_.compare_exchange_weak(p, now, std::memory_order_relaxed)) {
    }
    return true;
}

void MemoryBudget::reserve(uint64_t bytes, std::string_view what) {
    if (try_reserve(bytes)) return;
    const uint64_t in_use = used();
    const std::string hint = flag_.empty()
        ? fmt::format("raise the {} budget or reduce what needs it", name_)
        : fmt::format("raise {} or reduce what needs it", flag_);
    throw OutOfBudget(fmt::format("{} budget {}: {} requested by {}, {} free ({} in use)", name_,
                                  format_bytes(limit_), format_bytes(bytes), what,
                                  format_bytes(limit_ - std::min(in_use, limit_)), format_bytes(in_use)),
                      hint);
}

void MemoryBudget::release(uint64_t bytes) {
    const uint64_t before = used_.fetch_sub(bytes, std::memory_order_relaxed);
    STRATA_ASSERT(before >= bytes);
}

uint64_t MemoryBudget::available() const {
    const uint64_t u = used();
    return u >= limit_ ? 0 : limit_ - u;
}

std::string MemoryBudget::describe() const {
    return fmt::format("{} budget {}, {} in use, peak {}", name_, format_bytes(limit_), format_bytes(used()),
                       format_bytes(peak()));
}

Reservation::Reservation(MemoryBudget& budget, uint64_t bytes, std::string_view what) {
    budget.reserve(bytes, what);
    budget_ = &budget;
    bytes_ = bytes;
}

Reservation Reservation::or_warn(MemoryBudget& budget, uint64_t bytes, std::string_view what) {
    try {
        return Reservation(budget, bytes, what);
    } catch (const OutOfBudget& e) {
        STRATA_LOG_WARN("{}; running over the budget by that much", e.what());
        return {};
    }
}

Reservation& Reservation::operator=(Reservation&& o) noexcept {
    if (this != &o) {
        reset();
        budget_ = o.budget_;
        bytes_ = o.bytes_;
        o.budget_ = nullptr;
        o.bytes_ = 0;
    }
    return *this;
}

void Reservation::reset() {
    if (budget_ && bytes_) budget_->release(bytes_);
    budget_ = nullptr;
    bytes_ = 0;
}

}  // namespace strata::storage
