#include "planner/speculation.h"

#include <algorithm>
#include <vector>

namespace strata::planner {

SpecForecast forecast_draft(const std::function<double(int64_t rows)>& pass_seconds, std::span<const double> node_chances,
                            int64_t others, double draft_seconds) {
    SpecForecast f;
    const double base = pass_seconds(others + 1);
    if (!(base > 0)) return f;
    f.plain_tokens_per_s = f.tokens_per_s = (double(others) + 1) / base;
    double expected = 0;
    for (size_t i = 0; i < node_chances.size(); ++i) {
        expected += node_chances[i];
        const auto k = static_cast<int64_t>(i) + 1;
        const double speed = (double(others) + 1 + expected) / (pass_seconds(others + 1 + k) + double(k) * draft_seconds);
        if (speed > f.tokens_per_s) f.tokens_per_s = speed, f.depth = static_cast<int32_t>(k), f.tokens_per_pass = 1 + expected;
    }
    return f;
}

SpecForecast forecast_speculation(const std::function<double(int64_t rows)>& pass_seconds, double acceptance,
                                  int32_t max_depth, int64_t others, double draft_seconds) {
    std::vector<double> chances(size_t(std::max(max_depth, 0)));
    double p = 1;
    for (double& c : chances) c = (p *= acceptance);
    return forecast_draft(pass_seconds, chances, others, draft_seconds);
}

}  // namespace strata::planner
