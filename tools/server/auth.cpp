#include "tools/server/auth.h"

#include <cstddef>

namespace strata::server {

bool constant_time_equal(std::string_view given, std::string_view expected) {
    // Every byte of `expected` is compared whatever `given` holds; a length mismatch only
    // sets the result, it does not stop the loop.
    unsigned diff = given.size() != expected.size();
    for (size_t i = 0; i < expected.size(); ++i) {
        const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
        diff |= g ^ static_cast<unsigned char>(expected[i]);
    }
    return diff == 0;
}

bool bearer_matches(std::string_view authorization, std::string_view key) {
    constexpr std::string_view kScheme = "Bearer ";
    if (authorization.size() < kScheme.size()) return false;
    for (size_t i = 0; i < kScheme.size(); ++i)  // the scheme is case-insensitive (RFC 9110)
        if ((authorization[i] | 0x20) != (kScheme[i] | 0x20)) return false;
    std::string_view token = authorization.substr(kScheme.size());
    while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
    while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
    return constant_time_equal(token, key);
}

bool key_matches(std::string_view authorization, std::string_view x_api_key, std::string_view key) {
    return bearer_matches(authorization, key) || (!x_api_key.empty() && constant_time_equal(x_api_key, key));
}

}  // namespace strata::server
