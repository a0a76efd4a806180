// The GPU layer schedule run on a model of two in-order streams (copies, compute) with events:
// it must be valid (a slot is never overwritten before the compute that reads it, every layer
// computed once and in order after its copy) and overlap copies with compute as a double buffer
// does: the pass takes the larger of the two streams' work, not their sum.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <vector>

#include "runtime/exec/layer_pipeline.h"

using namespace strata;
using namespace strata::runtime;

namespace {

struct Timing {
    double copy = 0, compute = 0;  // per layer
};

// Plays the schedule and returns when the last compute ends; fails the test on an invalid step.
double simulate(const std::vector<PipelineStep>& steps, const std::vector<bool>& on_device, int n_slots, Timing t) {
    double copy_free = 0, compute_free = 0;
    std::map<int, double> copied_at;          // layer -> its copy's end
    std::vector<int> holds(n_slots, -1);      // slot -> layer in it
    std::vector<double> slot_read_until(n_slots, 0);  // slot -> end of the last compute that read it
    std::vector<bool> computed_issued(on_device.size(), false);
    int next_compute = 0;
    for (const PipelineStep& s : steps) {
        if (s.kind == PipelineStep::Copy) {
            REQUIRE(!on_device.at(s.layer));
            REQUIRE(copied_at.count(s.layer) == 0);
            REQUIRE(s.slot >= 0);
            REQUIRE(s.slot < n_slots);
            // The slot's previous layer must have had its compute issued: that is the event waited on.
            if (holds[s.slot] >= 0) REQUIRE(computed_issued[holds[s.slot]]);
            const double start = std::max(copy_free, slot_read_until[s.slot]);
            copy_free = start + t.copy;
            copied_at[s.layer] = copy_free;
            holds[s.slot] = s.layer;
        } else {
            REQUIRE(s.layer == next_compute++);
            double start = compute_free;
            if (on_device[s.layer]) {
                REQUIRE(s.slot == -1);
            } else {
                REQUIRE(s.slot >= 0);
                REQUIRE(holds[s.slot] == s.layer);
                start = std::max(start, copied_at.at(s.layer));
            }
            compute_free = start + t.compute;
            if (s.slot >= 0) slot_read_until[s.slot] = compute_free;
            computed_issued[s.layer] = true;
        }
    }
    REQUIRE(next_compute == static_cast<int>(on_device.size()));
    REQUIRE(copied_at.size() == static_cast<size_t>(std::count(on_device.begin(), on_device.end(), false)));
    return compute_free;
}

std::vector<bool> first_resident(int n_layer, int n_resident) {
    std::vector<bool> v(n_layer, false);
    for (int l = 0; l < n_resident; ++l) v[l] = true;
    return v;
}

}  // namespace

TEST_CASE("layer schedule: valid for every mix of resident and streamed layers", "[layer_pipeline]") {
    for (int n_layer : {1, 2, 5, 12})
        for (int n_slots : {1, 2, 3})
            for (uint32_t mask = 0; mask < (1u << std::min(n_layer, 5)); ++mask) {
                std::vector<bool> on_device(n_layer, true);
                for (int l = 0; l < n_layer; ++l) on_device[l] = (mask >> (l % 5)) & 1;
                simulate(layer_schedule(on_device, n_slots), on_device, n_slots, {1.0, 1.0});
            }
}

TEST_CASE("layer schedule: one slot cannot overlap, two hide the copies behind compute", "[layer_pipeline]") {
    const int L = 10;
    const auto streamed = first_resident(L, 0);
    // One slot: every copy waits for the previous layer's compute, and every compute for its copy.
    CHECK(simulate(layer_schedule(streamed, 1), streamed, 1, {2.0, 3.0}) == Approx(L * (2.0 + 3.0)));
    // Two slots, copies faster than compute: only the first copy shows.
    CHECK(simulate(layer_schedule(streamed, 2), streamed, 2, {2.0, 3.0}) == Approx(2.0 + L * 3.0));
    // Two slots, copies slower: the copy stream is the bottleneck, the last compute follows it.
    CHECK(simulate(layer_schedule(streamed, 2), streamed, 2, {3.0, 2.0}) == Approx(L * 3.0 + 2.0));
}

TEST_CASE("layer schedule: the first streamed layers load while the resident ones compute", "[layer_pipeline]") {
    // 4 resident layers compute in [0, 4] while layers 4 and 5 copy in [0, 2] and [2, 4]. Then
    // compute 4 [4, 5] frees slot 0: copy 6 [5, 7]; compute 5 [5, 6] frees slot 1: copy 7
    // [7, 9]; compute 6 [7, 8], compute 7 [9, 10].
    const auto on_device = first_resident(8, 4);
    CHECK(simulate(layer_schedule(on_device, 2), on_device, 2, {2.0, 1.0}) == Approx(10.0));
    // All resident: no copies at all, compute back to back.
    const auto all = first_resident(6, 6);
    const auto steps = layer_schedule(all, 2);
    CHECK(std::none_of(steps.begin(), steps.end(), [](const PipelineStep& s) { return s.kind == PipelineStep::Copy; }));
    CHECK(simulate(steps, all, 2, {5.0, 1.0}) == Approx(6.0));
}
