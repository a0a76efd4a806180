#pragma once
// GET /metrics: Prometheus text exposition of what the server has done (responses by route
// and status, cancellations, time to first token) beside the scheduler's counters (requests,
// tokens, queue depth, throughput) and the memory tiers' budgets.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "runtime/scheduler.h"
#include "storage/budget.h"

namespace strata::server {

class Metrics {
public:
    // `route` is a known route or "other", so that clients cannot grow the label set.
    void count_response(const std::string& route, int status);
    void count_cancelled();
    void observe_first_token(double seconds);

    std::string render(const runtime::SchedulerStats& s, const storage::MemoryBudget& dram) const;

private:
    mutable std::mutex mu_;
    std::map<std::pair<std::string, int>, uint64_t> responses_;
    uint64_t cancelled_ = 0;
    double ttft_sum_ = 0;
    uint64_t ttft_count_ = 0;
};

}  // namespace strata::server
