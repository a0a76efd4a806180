#pragma once
// Sizes and times as the planner's users write and read them. Sizes are parsed and printed by
// core/bytes.h (parse_memory_size, format_bytes), as the runtime's --dram is, so that a
// plan and a run describe memory the same way.
#include <cstdint>
#include <string>
#include <string_view>

#include "core/bytes.h"

namespace strata::planner {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
inline constexpr double kGB = 1e9;

// parse_memory_size ("24G", "512M", "40%" of `total`) with `flag` named in the error.
uint64_t parse_size(std::string_view text, std::string_view flag, uint64_t total);

// The planner holds bytes as doubles (LP shares): format_bytes of the rounded value.
inline std::string format_size(double bytes) {
    return format_bytes(bytes > 0 ? static_cast<uint64_t>(bytes + 0.5) : 0);
}
// "1.23 s", "45.6 ms", "789 us"
std::string format_seconds(double s);

}  // namespace strata::planner
