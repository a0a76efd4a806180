// When a plan with a device is chosen over the CPU alone (planner/policy_search.h).
#include <catch2/catch.hpp>

#include "planner/policy_search.h"

using namespace strata::planner;

namespace {
// A prediction decoding at `tps` whose workload takes `objective_s` a generated token.
Prediction predicted(double tps, double objective_s) {
    Prediction p;
    p.decode_tps_per_seq = tps;
    p.objective_s = objective_s;
    return p;
}
}  // namespace

TEST_CASE("a device plan is chosen over the CPU alone when it decodes faster by the margin, or as fast and finishes "
          "the workload sooner by it",
          "[unit][planner]") {
    // A 512-token prompt and 16 tokens: the CPU alone prefills in 3.9 s and decodes at 22.7 t/s.
    const Prediction cpu = predicted(22.7, (3.88 + 16 / 22.7) / 16);
    // Faster decoding by the margin, whatever the prefill.
    CHECK(device_beats_cpu(predicted(kDeviceWinMargin * 22.7 * 1.01, cpu.objective_s * 2), cpu));
    // A near tie in decoding, its first token in 0.13 s: the whole request 3.6x sooner.
    CHECK(device_beats_cpu(predicted(23.5, (0.126 + 16 / 23.5) / 16), cpu));
    // Sooner over the workload but decoding slower: the CPU alone (never slower than it).
    CHECK_FALSE(device_beats_cpu(predicted(21.0, (0.126 + 16 / 21.0) / 16), cpu));
    // A near tie in both: the CPU alone.
    CHECK_FALSE(device_beats_cpu(predicted(23.5, cpu.objective_s / (kDeviceWinMargin * 0.99)), cpu));
    // No objective priced: decoding alone decides.
    CHECK_FALSE(device_beats_cpu(predicted(23.5, 0), cpu));
}
