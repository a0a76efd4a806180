#include "core/bytes.h"

#include <unistd.h>

#include <cctype>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"

namespace strata {

uint64_t system_ram_bytes() {
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) throw IoError("cannot query the amount of RAM (sysconf failed)");
    return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

namespace {

[[noreturn]] void bad_size(std::string_view text, std::string_view why) {
    throw UsageError(fmt::format("invalid memory size '{}': {}", text, why),
                     "write bytes (4096), a size with a K, M, G or T suffix (512M, 1.5G; powers of 1024) "
                     "or a share of RAM (40%)");
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return s;
}

// Multiplier for a unit suffix, 0 when the suffix is not one we know.
uint64_t unit_multiplier(std::string_view unit) {
    std::string u;
    for (char c : unit) u += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (u.empty() || u == "b") return 1;
    const std::string_view letters = "kmgt";
    const auto pos = letters.find(u[0]);
    if (pos == std::string_view::npos) return 0;
    const std::string_view rest = std::string_view(u).substr(1);
    if (!rest.empty() && rest != "b" && rest != "ib") return 0;
    return uint64_t{1} << (10 * (pos + 1));
}

}  // namespace

uint64_t parse_memory_size(std::string_view text, uint64_t total_ram) {
    const std::string_view s = trim(text);
    if (s.empty()) bad_size(text, "empty");
    // Split into a non-negative decimal number and a unit.
    size_t n = 0;
    while (n < s.size() && (std::isdigit(static_cast<unsigned char>(s[n])) || s[n] == '.')) ++n;
    const std::string_view number = s.substr(0, n);
    const std::string_view unit = trim(s.substr(n));
    if (number.empty() || number == ".") bad_size(text, "no number");

    double value = 0;
    const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
    if (ec != std::errc() || end != number.data() + number.size()) bad_size(text, "not a number");
    const bool fractional = number.find('.') != std::string_view::npos;

    if (unit == "%") {
        if (!(value > 0 && value <= 100)) bad_size(text, "a percentage must be above 0 and at most 100");
        return static_cast<uint64_t>(std::floor(static_cast<double>(total_ram) * value / 100.0));
    }
    const uint64_t mult = unit_multiplier(unit);
    if (mult == 0) bad_size(text, fmt::format("unknown unit '{}'", unit));
    if (mult == 1) {
        // Whole bytes only: "1.5" is almost certainly a forgotten suffix.
        if (fractional) bad_size(text, "a byte count must be a whole number (did you mean 1.5G?)");
        uint64_t bytes = 0;
        const auto [e2, ec2] = std::from_chars(number.data(), number.data() + number.size(), bytes);
        if (ec2 != std::errc() || e2 != number.data() + number.size()) bad_size(text, "too large");
        return bytes;
    }
    const double bytes = std::floor(value * static_cast<double>(mult));
    // 2^64 is exactly representable; anything at or above it does not fit.
    if (!(bytes < 18446744073709551616.0)) bad_size(text, "too large");
    return static_cast<uint64_t>(bytes);
}

namespace {
// `bytes` in the largest unit below it, one decimal: to the nearest, or rounded up.
std::string formatted(uint64_t bytes, bool up) {
    static const char* const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
    if (bytes < 1024) return fmt::format("{} B", bytes);
    double v = static_cast<double>(bytes);
    int u = -1;
    while (v >= 1024.0 && u < 4) v /= 1024.0, ++u;
    if (up) v = std::ceil(v * 10.0 - 1e-9) / 10.0;
    std::string s = fmt::format("{:.1f}", v);
    if (s.size() > 2 && s.substr(s.size() - 2) == ".0") s.resize(s.size() - 2);
    return s + " " + units[u];
}
}  // namespace

std::string format_bytes(uint64_t bytes) { return formatted(bytes, false); }
std::string format_bytes_at_least(uint64_t bytes) { return formatted(bytes, true); }

}  // namespace strata
