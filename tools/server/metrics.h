#pragma once
// GET /metrics: Prometheus text exposition of what the server has done (responses by route
// and status, refusals by reason, timeouts, cancellations, open connections, time to first token) beside the scheduler's counters (requests,
// tokens, queue depth, throughput) and the memory tiers' budgets.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "runtime/scheduler.h"

namespace strata::server {

// The DRAM the loaded models hold together, against the server's budget (0: no limit).
struct MemoryUse {
    uint64_t limit = 0, used = 0, peak = 0;
};

class Metrics {
public:
    // `route` is a known route or "other", so that clients cannot grow the label set.
    void count_response(const std::string& route, int status);
    void count_cancelled();
    // A request or connection refused before a handler ran it; `reason` is one of a fixed few.
    void count_rejected(const std::string& reason);
    void count_timed_out();
    void set_open_connections(size_t n);
    void observe_first_token(double seconds);

    std::string render(const runtime::SchedulerStats& s, const MemoryUse& dram) const;

private:
    mutable std::mutex mu_;
    std::map<std::pair<std::string, int>, uint64_t> responses_;
    uint64_t cancelled_ = 0, timed_out_ = 0;
    std::map<std::string, uint64_t> rejected_;
    size_t open_connections_ = 0;
    double ttft_sum_ = 0;
    uint64_t ttft_count_ = 0;
};

}  // namespace strata::server
