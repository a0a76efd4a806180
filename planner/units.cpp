#include "planner/units.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"

namespace strata::planner {

uint64_t parse_size(std::string_view text, std::string_view flag, uint64_t total) {
    try {
        return parse_memory_size(text, total);
    } catch (const UsageError& e) {
        throw UsageError(fmt::format("{}: {}", flag, e.what()), e.hint());
    }
}

std::string format_seconds(double s) {
    if (!std::isfinite(s)) return "inf";
    if (s >= 100) return fmt::format("{:.0f} s", s);
    if (s >= 1) return fmt::format("{:.2f} s", s);
    if (s >= 1e-3) return fmt::format("{:.1f} ms", s * 1e3);
    return fmt::format("{:.0f} us", s * 1e6);
}

}  // namespace strata::planner
