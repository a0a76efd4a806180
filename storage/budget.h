#pragma once
// Memory sizes as users write them ("512M", "6G", "40%") and the budgets they set. Every
// allocation the engine makes on a tier is reserved here first, so "never more than the
// budget" is checked in one place and a refusal names who asked and how much.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace strata::storage {

// Physical RAM from sysconf(_SC_PHYS_PAGES) * page size. Not hwloc's NUMA figure: on the
// balloon-backed VMs it under-reports RAM by 4x (see shared/env.md).
uint64_t system_ram_bytes();

// Parses "4096" (bytes), "512K", "512M", "6G", "1.5G", "2T" (powers of 1024; an optional
// "B" or "iB" after the letter is accepted, any case) or "40%" of `total_ram`.
// Throws UsageError naming the text on anything else, on overflow, and on percentages
// outside (0, 100].
uint64_t parse_memory_size(std::string_view text, uint64_t total_ram);
inline uint64_t parse_memory_size(std::string_view text) {
    return parse_memory_size(text, system_ram_bytes());
}

// "512 MiB", "1.5 GiB", "600 B": the form used in every budget message.
std::string format_bytes(uint64_t bytes);

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
