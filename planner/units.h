#pragma once
// Sizes and rates as the planner's users write them ("24G", "7.0") and as it prints them.
// Sizes are bytes (powers of 1024 for the suffixes); rates are decimal GB/s, as vendors quote.
#include <cstdint>
#include <string>
#include <string_view>

namespace strata::planner {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
inline constexpr double kGB = 1e9;

// "4096", "512M", "24G", "1.5T", "64GiB", "64GB" (any case; K/M/G/T are powers of 1024).
// Throws UsageError naming `flag` on anything else.
uint64_t parse_size(std::string_view text, std::string_view flag);
// A positive decimal number ("7", "12.5"); throws UsageError naming `flag`.
double parse_positive(std::string_view text, std::string_view flag);

// "23.5 GiB", "640 MiB", "12 KiB"
std::string format_size(double bytes);
// "1.23 s", "45.6 ms", "789 us"
std::string format_seconds(double s);

}  // namespace strata::planner
