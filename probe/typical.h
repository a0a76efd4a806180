#pragma once
// The probe's estimate from repeated timings: their median. On a machine shared with others the
// fastest run is the exception (no neighbour busy at that moment), and a workload running for
// seconds sees the typical rate, which is what the planner predicts.
#include <algorithm>
#include <vector>

namespace strata::probe {

inline double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
}

}  // namespace strata::probe
