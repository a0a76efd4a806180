#include "runtime/grammar/integer_range.h"

#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace strata::runtime {

namespace {

constexpr int kMaxDigits = 16;

std::string digits_between(char a, char b) { return a == b ? fmt::format("\"{}\"", a) : fmt::format("[{}-{}]", a, b); }

std::string any_digits(size_t n) { return n == 0 ? "" : n == 1 ? "[0-9]" : fmt::format("[0-9]{{{}}}", n); }

std::string join(const std::vector<std::string>& parts) {
    std::string out;
    for (const std::string& p : parts)
        if (!p.empty()) out += (out.empty() ? "" : " ") + p;
    return out;
}

// Numbers written with x.size() digits from x to y (x <= y, equal lengths).
std::string same_length(std::string_view x, std::string_view y) {
    if (x.empty()) return "";
    const size_t rest = x.size() - 1;
    if (x[0] == y[0]) return join({digits_between(x[0], x[0]), same_length(x.substr(1), y.substr(1))});
    const bool x_low = x.substr(1).find_first_not_of('0') == std::string_view::npos;
    const bool y_high = y.substr(1).find_first_not_of('9') == std::string_view::npos;
    if (x_low && y_high) return join({digits_between(x[0], y[0]), any_digits(rest)});
    std::vector<std::string> alts;
    // x's first digit then at least the rest of x; the digits between, then anything; y's first digit then at most the rest of y.
    alts.push_back(join({digits_between(x[0], x[0]), same_length(x.substr(1), std::string(rest, '9'))}));
    if (y[0] - x[0] >= 2) alts.push_back(join({digits_between(static_cast<char>(x[0] + 1), static_cast<char>(y[0] - 1)), any_digits(rest)}));
    alts.push_back(join({digits_between(y[0], y[0]), same_length(std::string(rest, '0'), y.substr(1))}));
    std::string out;
    for (const std::string& a : alts) out += (out.empty() ? "(" : " | ") + a;
    return out + ")";
}

uint64_t largest_of(size_t digits) {
    uint64_t v = 0;
    for (size_t i = 0; i < digits; ++i) v = v * 10 + 9;
    return v;
}

// Non-negative a..b, b at most kMaxDigits digits.
std::string natural_range(uint64_t a, uint64_t b) {
    std::vector<std::string> alts;
    const size_t da = std::to_string(a).size(), db = std::to_string(b).size();
    for (size_t d = da; d <= db; ++d) {
        const uint64_t lo = d == da ? a : largest_of(d - 1) + 1;
        const uint64_t hi = d == db ? b : largest_of(d);
        alts.push_back(same_length(std::to_string(lo), std::to_string(hi)));
    }
    std::string out;
    for (const std::string& a : alts) out += (out.empty() ? "(" : " | ") + a;
    return out + ")";
}

}  // namespace

std::string integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi) {
    if (lo && hi && *lo > *hi) throw UsageError(fmt::format("the integer range {}..{} is empty", *lo, *hi));
    const uint64_t most = largest_of(kMaxDigits);
    std::vector<std::string> alts;
    // The negative part: -1..-most clipped to the range, as "-" and its magnitude.
    if (!lo || *lo < 0) {
        const uint64_t mag_lo = hi && *hi < 0 ? static_cast<uint64_t>(-*hi) : 1;
        const uint64_t mag_hi = lo ? std::min<uint64_t>(static_cast<uint64_t>(-(*lo + 1)) + 1, most) : most;
        if (mag_lo <= mag_hi) alts.push_back("\"-\" " + natural_range(mag_lo, mag_hi));
    }
    if (!hi || *hi >= 0) {
        const uint64_t a = lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
        const uint64_t b = hi ? std::min<uint64_t>(static_cast<uint64_t>(*hi), most) : most;
        if (a <= b) alts.push_back(natural_range(a, b));
    }
    if (alts.empty())
        throw UsageError(fmt::format("the integer range {}..{} holds no number of at most {} digits", lo ? std::to_string(*lo) : "",
                                     hi ? std::to_string(*hi) : "", kMaxDigits));
    std::string out;
    for (const std::string& a : alts) out += (out.empty() ? "(" : " | ") + a;
    return out + ")";
}

}  // namespace strata::runtime
