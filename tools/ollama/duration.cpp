#include "tools/ollama/duration.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "core/error.h"

namespace strata::ollama {

std::chrono::seconds seconds_duration(double seconds) { return std::chrono::seconds(std::llround(seconds)); }

std::chrono::seconds parse_duration(std::string_view text) {
    const auto bad = [&] {
        return UsageError(fmt::format("'{}' is not a duration", text), "give seconds (300) or a duration such as 5m, 1h30m or -1 (for ever)");
    };
    if (text.empty()) throw bad();
    double plain = 0;
    if (auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), plain); ec == std::errc() && end == text.data() + text.size())
        return seconds_duration(plain);
    std::string_view rest = text;
    const bool negative = rest.front() == '-';
    if (negative || rest.front() == '+') rest.remove_prefix(1);
    double total = 0;
    while (!rest.empty()) {
        double value = 0;
        const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
        if (ec != std::errc() || value < 0) throw bad();
        rest.remove_prefix(static_cast<size_t>(end - rest.data()));
        size_t unit_len = 0;
        while (unit_len < rest.size() && std::isalpha(static_cast<unsigned char>(rest[unit_len]))) ++unit_len;
        const std::string_view unit = rest.substr(0, unit_len);
        rest.remove_prefix(unit_len);
        if (unit == "h") total += value * 3600;
        else if (unit == "m") total += value * 60;
        else if (unit == "s") total += value;
        else if (unit == "ms") total += value / 1e3;
        else if (unit == "us") total += value / 1e6;
        else if (unit == "ns") total += value / 1e9;
        else throw bad();
    }
    return seconds_duration(negative ? -total : total);
}

}  // namespace strata::ollama
