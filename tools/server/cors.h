#pragma once
// Cross-origin requests (`--cors-origin ORIGIN`, repeatable): which web pages served from
// another origin may call the server from a browser. A listed origin is echoed in
// Access-Control-Allow-Origin (with Vary: Origin); `*` allows every page, and only together
// with --api-key, so that a page anyone opens cannot use a server that has no key. A preflight
// (OPTIONS with Access-Control-Request-Method) is answered 204 with the methods and headers the
// API takes; the Authorization header is named, since a wildcard does not cover it (and
// Anthropic's clients' x-api-key and anthropic-version).
#include <string>
#include <string_view>
#include <vector>

namespace strata::server {

inline constexpr const char* kCorsAllowHeaders = "Authorization, Content-Type, x-api-key, anthropic-version";
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

// A preflight's Access-Control-Allow-Headers for an allowed origin: kCorsAllowHeaders and the
// headers it asks for (Access-Control-Request-Headers: the SDKs' own, such as x-stainless-* and
// anthropic-dangerous-direct-browser-access), those that are header names.
std::string allowed_headers(std::string_view asked);

// Whether a request's Origin is the server's own page: scheme://host[:port] naming the Host the
// request was sent to (a browser sends its page's Origin with every POST, same-origin ones too).
bool same_origin(std::string_view origin, std::string_view host_header);

// Whether a request that carries `origin` runs: none (not a browser), the server's own page, a
// page on this machine (a loopback host, any port: a proxy there may send its own Host), or one
// `cors` allows. A page elsewhere is refused even where it needs no preflight (a plain-text
// POST), which would otherwise run with its answer merely hidden from the page.
bool origin_may_call(const CorsPolicy& cors, std::string_view origin, std::string_view host_header);

// Whether a server listening on `bind_host` answers a request sent to `host_header`. One bound to
// a loopback address answers only loopback names (localhost, 127.x.y.z, [::1]), its own address
// and the `allowed` names (--allow-host: a proxy's public name it passes on): a page whose host
// name was re-pointed at 127.0.0.1 (DNS rebinding) would otherwise read its answers as its own
// origin. One bound to any other address answers every name (its --api-key guards it). A request
// without a Host (HTTP/1.0) is answered. Names compare without case or port.
bool host_allowed(std::string_view host_header, std::string_view bind_host, const std::vector<std::string>& allowed = {});

}  // namespace strata::server
