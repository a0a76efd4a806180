#pragma once
// A GBNF expression for the decimal integers in lo..hi (either end may be open), as JSON writes
// them: no leading zeros, "-" for negatives, at most 16 digits (the JSON schema grammar's
// integral part). Built digit by digit as a regular expression for a numeric range is: per
// digit count, the numbers sharing a prefix with the bounds, then free digits after it.
#include <cstdint>
#include <optional>
#include <string>

namespace strata::runtime {

// Throws UsageError when the range is empty.
std::string integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi);

}  // namespace strata::runtime
