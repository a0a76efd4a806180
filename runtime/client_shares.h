#pragma once
// What each client of the scheduler (a server's peer address; "" for callers that do not say)
// was served lately, in tokens evaluated for it, older steps counting less. The scheduler
// admits requests and orders prompt chunks least-served client first, and counts a client
// served lately as one to share with, so that a client between two requests keeps its place.
#include <cstdint>
#include <string>
#include <unordered_map>

namespace strata::runtime {

class ClientShares {
public:
    // Service halves every this many steps.
    static constexpr int kHalfLifeSteps = 8;

    // `tokens` evaluated for `client` in this step.
    void served(const std::string& client, int64_t tokens);
    // After each step: older service counts less; a client whose service fell below one
    // token is forgotten.
    void end_step();
    // Nothing queued or running: nobody to be fair to.
    void forget() { service_.clear(); }
    double service(const std::string& client) const;
    const std::unordered_map<std::string, double>& recent() const { return service_; }

private:
    std::unordered_map<std::string, double> service_;
};

}  // namespace strata::runtime
