#pragma once
// Cross-origin requests (`--cors-origin ORIGIN`, repeatable): which web pages served from
// another origin may call the server from a browser. A listed origin is echoed in
// Access-Control-Allow-Origin (with Vary: Origin); `*` allows every page, and only together
// with --api-key, so that a page anyone opens cannot use a server that has no key. A preflight
// (OPTIONS with Access-Control-Request-Method) is answered 204 with the methods and headers the
// API takes; the Authorization header is named, since a wildcard does not cover it.
#include <string>
#include <string_view>
#include <vector>

namespace strata::server {

inline constexpr const char* kCorsAllowHeaders = "Authorization, Content-Type";
inline constexpr int kCorsMaxAgeS = 600;  // how long a browser may reuse a preflight's answer

class CorsPolicy {
public:
    CorsPolicy() = default;
    // Throws UsageError for an origin that is not scheme://host[:port] or `*`, and for `*`
    // without an API key.
    CorsPolicy(const std::vector<std::string>& origins, bool has_api_key);
    bool enabled() const { return any_ || !origins_.empty(); }
    // The Access-Control-Allow-Origin value for a request's Origin header; empty when that
    // origin is not allowed (or the request named none).
    std::string allow_origin(std::string_view origin) const;

private:
    bool any_ = false;
    std::vector<std::string> origins_;
};

}  // namespace strata::server
