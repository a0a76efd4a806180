#include "models/chat_text.h"

#include <array>
#include <cstdint>
#include <ctime>

namespace strata::models {

namespace {

// Python's str.isspace() code points.
bool is_py_space(uint32_t c) {
    constexpr std::array<uint32_t, 9> kOther = {0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0x20};
    if ((c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F) || (c >= 0x2000 && c <= 0x200A)) return true;
    for (uint32_t o : kOther)
        if (c == o) return true;
    return false;
}

// The code point that starts at s[i] and its length in bytes (a byte of malformed UTF-8, an
// overlong form, a surrogate or a value past U+10FFFF included: 0, 1).
std::pair<uint32_t, size_t> code_point_at(std::string_view s, size_t i) {
    const auto b = static_cast<unsigned char>(s[i]);
    const size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return {0, 1};
    if (n == 1) return {b, 1};
    uint32_t c = b & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) {
        const auto t = static_cast<unsigned char>(s[i + k]);
        if ((t >> 6) != 0x2) return {0, 1};
        c = (c << 6) | (t & 0x3F);
    }
    constexpr uint32_t kLeast[5] = {0, 0, 0x80, 0x800, 0x10000};  // the smallest a form of n bytes may hold
    if (c < kLeast[n] || (c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF) return {0, 1};
    return {c, n};
}

// Where the last code point before `end` starts.
size_t last_start(std::string_view s, size_t end) {
    size_t i = end - 1;
    for (size_t back = 0; back < 3 && i > 0 && (static_cast<unsigned char>(s[i]) >> 6) == 0x2; ++back) --i;
    return code_point_at(s, i).second == end - i ? i : end - 1;
}

}  // namespace

std::string_view py_lstrip(std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
        const auto [c, n] = code_point_at(s, i);
        if (!is_py_space(c)) break;
        i += n;
    }
    return s.substr(i);
}

std::string_view py_rstrip(std::string_view s) {
    size_t end = s.size();
    while (end > 0) {
        const size_t at = last_start(s, end);
        if (!is_py_space(code_point_at(s, at).first)) break;
        end = at;
    }
    return s.substr(0, end);
}

std::string_view py_strip(std::string_view s) { return py_lstrip(py_rstrip(s)); }

std::string_view lstrip_chars(std::string_view s, std::string_view chars) {
    const size_t a = s.find_first_not_of(chars);
    return a == std::string_view::npos ? std::string_view() : s.substr(a);
}

std::string_view rstrip_chars(std::string_view s, std::string_view chars) {
    const size_t b = s.find_last_not_of(chars);
    return b == std::string_view::npos ? std::string_view() : s.substr(0, b + 1);
}

std::string_view strip_chars(std::string_view s, std::string_view chars) { return lstrip_chars(rstrip_chars(s, chars), chars); }

std::string local_date(const char* format) {
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    char buf[64];
    return std::string(buf, std::strftime(buf, sizeof buf, format, &tm));
}

}  // namespace strata::models
