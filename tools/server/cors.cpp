#include "tools/server/cors.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "core/error.h"

namespace strata::server {

namespace {
std::string lower(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

// An origin as browsers send it: scheme://host[:port], lower case, nothing after.
bool is_origin(std::string_view o) {
    const size_t scheme = o.find("://");
    if (scheme == std::string_view::npos || scheme == 0) return false;
    const std::string_view host = o.substr(scheme + 3);
    return !host.empty() && host.find_first_of("/?#@ ") == std::string_view::npos;
}
// "host:port", "[::1]:port" or "host" without its port, lower case.
std::string host_name(std::string_view authority) {
    if (authority.starts_with('[')) {
        const size_t end = authority.find(']');
        return lower(authority.substr(1, end == std::string_view::npos ? std::string_view::npos : end - 1));
    }
    const size_t colon = authority.find(':');
    // More than one colon: a bare IPv6 address, no port.
    if (colon != std::string_view::npos && authority.find(':', colon + 1) == std::string_view::npos)
        authority = authority.substr(0, colon);
    return lower(authority);
}

bool is_loopback(std::string_view name) {
    if (name == "localhost" || name.ends_with(".localhost") || name == "::1") return true;
    return name.starts_with("127.") && name.find_first_not_of("0123456789.") == std::string_view::npos;
}
}  // namespace

std::string allowed_headers(std::string_view asked) {
    std::string out = kCorsAllowHeaders;
    for (size_t at = 0; at < asked.size();) {
        const size_t comma = std::min(asked.find(',', at), asked.size());
        std::string_view name = asked.substr(at, comma - at);
        at = comma + 1;
        while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
        while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
        const bool token = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
        });
        if (token) out += ", " + std::string(name);
    }
    return out;
}

bool same_origin(std::string_view origin, std::string_view host_header) {
    const size_t scheme = origin.find("://");
    return scheme != std::string_view::npos && !host_header.empty() && lower(origin.substr(scheme + 3)) == lower(host_header);
}

bool origin_may_call(const CorsPolicy& cors, std::string_view origin, std::string_view host_header) {
    if (origin.empty() || same_origin(origin, host_header) || !cors.allow_origin(origin).empty()) return true;
    const size_t scheme = origin.find("://");
    return scheme != std::string_view::npos && is_loopback(host_name(origin.substr(scheme + 3)));
}

bool host_allowed(std::string_view host_header, std::string_view bind_host, const std::vector<std::string>& allowed) {
    if (host_header.empty() || !is_loopback(host_name(bind_host))) return true;
    const std::string name = host_name(host_header);
    return is_loopback(name) || name == host_name(bind_host) ||
           std::any_of(allowed.begin(), allowed.end(), [&](const std::string& a) { return host_name(a) == name; });
}

CorsPolicy::CorsPolicy(const std::vector<std::string>& origins, bool has_api_key) {
    for (std::string o : origins) {
        while (o.size() > 1 && o.back() == '/') o.pop_back();  // "http://host:3000/" as users paste it
        if (o == "*") {
            if (!has_api_key)
                throw UsageError("--cors-origin '*' would let any web page a user opens use this server",
                                 "give --api-key KEY with it (or STRATA_API_KEY), or list the pages' origins instead: "
                                 "--cors-origin http://localhost:3000");
            any_ = true;
            continue;
        }
        if (!is_origin(o))
            throw UsageError(fmt::format("--cors-origin '{}' is not an origin", o),
                             "give the page's scheme, host and port, e.g. --cors-origin http://localhost:3000");
        origins_.push_back(lower(o));
    }
}

std::string CorsPolicy::allow_origin(std::string_view origin) const {
    if (origin.empty()) return {};
    if (any_) return "*";
    const std::string o = lower(origin);
    return std::find(origins_.begin(), origins_.end(), o) != origins_.end() ? std::string(origin) : std::string();
}

}  // namespace strata::server
