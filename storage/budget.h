#pragma once
// The budgets users set on a memory tier (sizes as they write them: core/bytes.h). Every
// allocation the engine makes on a tier is reserved here first, so "never more than the
// budget" is checked in one place and a refusal names who asked and how much.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/bytes.h"

namespace strata::storage {

// A byte budget shared by threads: reservations are lock-free and never overshoot the limit.
class MemoryBudget {
public:
    // `name` is the tier as the user knows it ("DRAM", "GPU"); `flag` the option that sets
    // it ("--dram"), quoted in the hint when a reservation is refused.
    MemoryBudget(std::string name, uint64_t limit, std::string flag = {});
    MemoryBudget(const MemoryBudget&) = delete;
    MemoryBudget& operator=(const MemoryBudget&) = delete;

    // Expected outcome, so a value: false when `bytes` does not fit next to what is in use.
    bool try_reserve(uint64_t bytes);
    // For callers that cannot go on without the memory: throws OutOfBudget, e.g.
    // "DRAM budget 512 MiB: 600 MiB requested by KV cache, 412 MiB free (100 MiB in use)".
    void reserve(uint64_t bytes, std::string_view what);
    // Returns bytes reserved earlier; releasing more than is in use is a bug (asserts).
    void release(uint64_t bytes);

    const std::string& name() const { return name_; }
    uint64_t limit() const { return limit_; }
    // A new limit (memory taken away or given back); what is in use may exceed it, and then
    // nothing more fits until enough is released. Not while another thread reserves.
    void set_limit(uint64_t limit) { limit_ = limit; }
    uint64_t used() const { return used_.load(std::memory_order_relaxed); }
    uint64_t peak() const { return peak_.load(std::memory_order_relaxed); }
    uint64_t available() const;
    // "DRAM budget 512 MiB, 100 MiB in use, peak 200 MiB"
    std::string describe() const;

private:
    std::string name_;
    std::string flag_;
    uint64_t limit_;
    std::atomic<uint64_t> used_{0};
    std::atomic<uint64_t> peak_{0};
};

// Bytes held in a MemoryBudget for the lifetime of this object (move-only).
class Reservation {
public:
    Reservation() = default;
    // Throws OutOfBudget like MemoryBudget::reserve.
    Reservation(MemoryBudget& budget, uint64_t bytes, std::string_view what);
    // For memory the run holds whether or not the budget has room (a layer's KV cache copied
    // down from a device that lost memory): reserved where it fits, else a warning naming it
    // and nothing held.
    static Reservation or_warn(MemoryBudget& budget, uint64_t bytes, std::string_view what);
    Reservation(Reservation&& o) noexcept : budget_(o.budget_), bytes_(o.bytes_) { o.budget_ = nullptr; o.bytes_ = 0; }
    Reservation& operator=(Reservation&& o) noexcept;
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    ~Reservation() { reset(); }

    void reset();
    uint64_t bytes() const { return bytes_; }

private:
    MemoryBudget* budget_ = nullptr;
    uint64_t bytes_ = 0;
};

}  // namespace strata::storage
