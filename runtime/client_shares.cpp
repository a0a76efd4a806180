#include "runtime/client_shares.h"

#include <cmath>
#include <iterator>

namespace strata::runtime {

void ClientShares::served(const std::string& client, int64_t tokens) { service_[client] += static_cast<double>(tokens); }

void ClientShares::end_step() {
    static const double kDecay = std::exp2(-1.0 / kHalfLifeSteps);
    for (auto it = service_.begin(); it != service_.end();) {
        it->second *= kDecay;
        it = it->second < 1.0 ? service_.erase(it) : std::next(it);
    }
}

double ClientShares::service(const std::string& client) const {
    const auto it = service_.find(client);
    return it == service_.end() ? 0.0 : it->second;
}

}  // namespace strata::runtime
