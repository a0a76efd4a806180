#pragma once
// Memory sizes as users write them ("512M", "6G", "40%") and as every message prints them, so
// that a plan, a budget and an error describe memory the same way.
#include <cstdint>
#include <string>
#include <string_view>

namespace strata {

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
// The same, rounded up instead of to the nearest: a size to give ("use --dram X or more")
// that holds at least `bytes` when typed back.
std::string format_bytes_at_least(uint64_t bytes);

}  // namespace strata
