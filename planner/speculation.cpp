#include "planner/speculation.h"

namespace strata::planner {

SpecForecast forecast_speculation(const std::function<double(int64_t rows)>& pass_seconds, double acceptance,
                                  int32_t max_depth, int64_t others, double draft_seconds) {
    SpecForecast f;
    const double base = pass_seconds(others + 1);
    if (!(base > 0)) return f;
    f.plain_tokens_per_s = f.tokens_per_s = (double(others) + 1) / base;
    double expected = 0, p = 1;
    for (int32_t k = 1; k <= max_depth; ++k) {
        expected += (p *= acceptance);
        const double speed = (double(others) + 1 + expected) / (pass_seconds(others + 1 + k) + k * draft_seconds);
        if (speed > f.tokens_per_s) f.tokens_per_s = speed, f.depth = k, f.tokens_per_pass = 1 + expected;
    }
    return f;
}

}  // namespace strata::planner
