#include "runtime/client_shares.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

#include "cpu/matmul.h"

namespace strata::runtime {

void ClientShares::done(const std::string& client) {
    if (--outstanding_[client] == 0) outstanding_.erase(client);
}

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

size_t ClientShares::active(const std::string* besides) const {
    size_t n = 0;
    for (const auto& [client, count] : outstanding_) n += !besides || client != *besides;
    for (const auto& [client, service] : service_) n += !outstanding_.contains(client) && (!besides || client != *besides);
    return n;
}

int ClientShares::batch_share(int max_batch, int per_client, size_t clients) {
    if (clients <= 1) return max_batch;
    if (per_client > 0) return std::min(per_client, max_batch);
    return std::max(1, max_batch / static_cast<int>(clients));
}

bool ClientShares::may_join(int64_t tokens, int64_t take, double service, double lightest_decoder) {
    return tokens + take <= cpu::kDecodeTokens || tokens > cpu::kDecodeTokens || service < lightest_decoder;
}

std::optional<std::string> ClientShares::light(const std::vector<std::string_view>& running) const {
    std::optional<std::string> lightest;
    double least = 0, next = std::numeric_limits<double>::infinity();  // the two least services
    for (const std::string_view client : running) {
        if (lightest && client == *lightest) continue;
        const double s = service(std::string(client));
        if (!lightest || s < least) {
            if (lightest) next = least;
            lightest = std::string(client);
            least = s;
        } else {
            next = std::min(next, s);
        }
    }
    if (!lightest || std::isinf(next) || least >= kLightShare * next) return std::nullopt;
    return lightest;
}

}  // namespace strata::runtime
