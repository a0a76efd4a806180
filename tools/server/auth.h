#pragma once
// API key checks for `strata serve --api-key`: "Authorization: Bearer KEY" (or "x-api-key: KEY").
#include <string_view>

namespace strata::server {

// Equal strings, in a time that does not depend on where they first differ (only on the
// length of `expected`), so a client cannot find the key one byte at a time.
bool constant_time_equal(std::string_view given, std::string_view expected);
// Whether an Authorization header value carries `key` as its Bearer token.
bool bearer_matches(std::string_view authorization, std::string_view key);
// Whether a request carries `key`: as its Bearer token, or as Anthropic's clients send it, in
// an x-api-key header.
bool key_matches(std::string_view authorization, std::string_view x_api_key, std::string_view key);

}  // namespace strata::server
