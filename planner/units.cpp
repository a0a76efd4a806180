#include "planner/units.h"

#include <cctype>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "runtime/core/error.h"

namespace strata::planner {

namespace {
bool parse_double(std::string_view s, double& v, size_t& used) {
    // std::from_chars for double is in libstdc++ 11+, and is locale-independent.
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    used = static_cast<size_t>(ptr - s.data());
    return ec == std::errc() && used > 0;
}
}  // namespace

uint64_t parse_size(std::string_view text, std::string_view flag) {
    double v = 0;
    size_t used = 0;
    auto bad = [&] {
        return UsageError(fmt::format("{} '{}' is not a size", flag, text), "write e.g. 24G, 512M, 1.5T or a byte count");
    };
    if (!parse_double(text, v, used) || v < 0 || !std::isfinite(v)) throw bad();
    std::string unit;
    for (char c : text.substr(used)) unit += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    double mult = 1;
    if (unit.empty() || unit == "B") mult = 1;
    else if (unit[0] == 'K') mult = 1024.0;
    else if (unit[0] == 'M') mult = 1024.0 * 1024;
    else if (unit[0] == 'G') mult = kGiB;
    else if (unit[0] == 'T') mult = kGiB * 1024;
    else throw bad();
    if (unit.size() > 1 && unit.substr(1) != "B" && unit.substr(1) != "IB") throw bad();
    const double bytes = v * mult;
    if (bytes > 1.8e19) throw bad();
    return static_cast<uint64_t>(bytes);
}

double parse_positive(std::string_view text, std::string_view flag) {
    double v = 0;
    size_t used = 0;
    if (!parse_double(text, v, used) || used != text.size() || !(v > 0) || !std::isfinite(v))
        throw UsageError(fmt::format("{} '{}' is not a positive number", flag, text));
    return v;
}

std::string format_size(double bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (std::fabs(bytes) >= 1024.0 && u < 4) bytes /= 1024.0, ++u;
    if (u == 0) return fmt::format("{:.0f} B", bytes);
    if (bytes >= 100) return fmt::format("{:.0f} {}", bytes, units[u]);
    return fmt::format("{:.1f} {}", bytes, units[u]);
}

std::string format_seconds(double s) {
    if (!std::isfinite(s)) return "inf";
    if (s >= 100) return fmt::format("{:.0f} s", s);
    if (s >= 1) return fmt::format("{:.2f} s", s);
    if (s >= 1e-3) return fmt::format("{:.1f} ms", s * 1e3);
    return fmt::format("{:.0f} us", s * 1e6);
}

}  // namespace strata::planner
