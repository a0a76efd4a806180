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
}  // namespace

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
