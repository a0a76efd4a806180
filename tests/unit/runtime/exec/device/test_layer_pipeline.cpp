// The device layer schedule run on a model of two in-order streams (copies, compute) with events
// and a host that runs the CPU layers: it must be valid (a slot is never overwritten before the
// compute that reads it, every layer computed once and in order after its copy, streamed layers
// taken from the weight stream in layer order) and overlap copies with compute as a double
// buffer does: the pass takes the larger of the two streams' work, not their sum.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <vector>

#include "runtime/exec/device/layer_pipeline.h"

using namespace strata;
using namespace strata::runtime;

namespace {

struct Timing {
    double copy = 0, compute = 0;  // per layer
    double build = 0;  // the host's work before a host_built layer's copy
};

// Plays the schedule and returns when the last compute ends; fails the test on an invalid step.
// A CPU layer runs on the host between the device computes before and after it. The host issues
// the steps in order: a host_built layer's copy after building it, into the next of n_slots host
// buffers, once the copy out of that buffer is done; nothing is issued meanwhile.
double simulate(const std::vector<PipelineStep>& steps, const std::vector<LayerWork>& layers, int n_slots, Timing t) {
    double copy_free = 0, compute_free = 0, host = 0;
    std::vector<double> built_copies;  // the end of each host_built layer's copy, in order
    std::map<int, double> copied_at;          // layer -> its copy's end
    std::vector<int> holds(n_slots, -1);      // slot -> layer in it
    std::vector<double> slot_read_until(n_slots, 0);  // slot -> end of the last compute that read it
    std::vector<bool> computed_issued(layers.size(), false);
    int next_compute = 0, last_streamed = -1;
    auto take_streamed = [&](int l) {  // the weight stream's order
        if (!layers[l].streamed) return;
        REQUIRE(l > last_streamed);
        last_streamed = l;
    };
    for (const PipelineStep& s : steps) {
        const LayerWork& w = layers.at(s.layer);
        if (s.kind == PipelineStep::Copy) {
            REQUIRE(w.site == LayerSite::CopiedIn);
            REQUIRE(copied_at.count(s.layer) == 0);
            REQUIRE(s.slot >= 0);
            REQUIRE(s.slot < n_slots);
            // The slot's previous layer must have had its compute issued: that is the event waited on.
            if (holds[s.slot] >= 0) REQUIRE(computed_issued[holds[s.slot]]);
            take_streamed(s.layer);
            if (w.host_built) {
                if (built_copies.size() >= size_t(n_slots)) host = std::max(host, built_copies[built_copies.size() - n_slots]);
                host += t.build;
            }
            const double start = std::max({copy_free, slot_read_until[s.slot], host});
            copy_free = start + t.copy;
            if (w.host_built) built_copies.push_back(copy_free);
            copied_at[s.layer] = copy_free;
            holds[s.slot] = s.layer;
            continue;
        }
        REQUIRE(s.layer == next_compute++);
        double start = std::max(compute_free, host);
        if (s.kind == PipelineStep::CpuCompute) {
            REQUIRE(w.site == LayerSite::Cpu);
            REQUIRE(s.slot == -1);
            take_streamed(s.layer);
        } else if (w.site == LayerSite::Device) {
            REQUIRE(s.slot == -1);
        } else {
            REQUIRE(w.site == LayerSite::CopiedIn);
            REQUIRE(s.slot >= 0);
            REQUIRE(holds[s.slot] == s.layer);
            start = std::max(start, copied_at.at(s.layer));
        }
        compute_free = start + t.compute;
        if (s.slot >= 0) slot_read_until[s.slot] = compute_free;
        computed_issued[s.layer] = true;
    }
    REQUIRE(next_compute == static_cast<int>(layers.size()));
    const auto n_copied = std::count_if(layers.begin(), layers.end(), [](const LayerWork& w) { return w.site == LayerSite::CopiedIn; });
    REQUIRE(copied_at.size() == static_cast<size_t>(n_copied));
    return compute_free;
}

std::vector<LayerWork> first_resident(int n_layer, int n_resident) {
    std::vector<LayerWork> v(n_layer, {LayerSite::CopiedIn, false});
    for (int l = 0; l < n_resident; ++l) v[l].site = LayerSite::Device;
    return v;
}

}  // namespace

TEST_CASE("layer schedule: valid for every mix of device, copied, host-built, streamed and CPU layers", "[layer_pipeline]") {
    const LayerWork kinds[] = {{LayerSite::Device, false}, {LayerSite::CopiedIn, false}, {LayerSite::CopiedIn, true},
                               {LayerSite::Cpu, false}, {LayerSite::Cpu, true}, {LayerSite::CopiedIn, false, true}};
    for (int n_layer : {1, 2, 5, 9})
        for (int n_slots : {1, 2, 3})
            for (int code = 0; code < 7776; code += n_layer < 5 ? 1 : 11) {
                std::vector<LayerWork> layers(n_layer);
                for (int l = 0, c = code; l < n_layer; ++l, c /= 6) layers[l] = kinds[(c + l) % 6];
                simulate(layer_schedule(layers, n_slots), layers, n_slots, {1.0, 1.0, 0.5});
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

TEST_CASE("layer schedule: op offload copies the CPU layers in too, keeping every layer where it was otherwise",
          "[layer_pipeline]") {
    // Device, CPU from DRAM, CPU streamed, copied in, CPU from DRAM.
    const std::vector<LayerWork> layers = {{LayerSite::Device, false}, {LayerSite::Cpu, false}, {LayerSite::Cpu, true},
                                           {LayerSite::CopiedIn, false}, {LayerSite::Cpu, false}};
    const std::vector<LayerWork> offloaded = op_offloaded(layers, {});
    REQUIRE(offloaded.size() == layers.size());
    for (size_t l = 0; l < layers.size(); ++l) {
        CHECK(offloaded[l].streamed == layers[l].streamed);
        CHECK(offloaded[l].site == (layers[l].site == LayerSite::Cpu ? LayerSite::CopiedIn : layers[l].site));
    }
    const auto steps = layer_schedule(offloaded, 2);
    CHECK(std::none_of(steps.begin(), steps.end(), [](const PipelineStep& s) { return s.kind == PipelineStep::CpuCompute; }));
    // Copies faster than compute: the first copy overlaps the device layer's compute, and the
    // other three copies each the compute before them: five computes back to back.
    CHECK(simulate(steps, offloaded, 2, {1.0, 2.0}) == Approx(5 * 2.0));
    // The CPU layers from DRAM are the host's to build; the streamed one comes as read.
    CHECK(offloaded[1].host_built);
    CHECK_FALSE(offloaded[2].host_built);
    CHECK(offloaded[4].host_built);
    // A CPU layer whose KV the host rebuilds from the hidden states it saves stays on the CPU.
    const std::vector<bool> rebuilt = {false, false, false, false, true};
    const std::vector<LayerWork> kept = op_offloaded(layers, rebuilt);
    CHECK(kept[1].site == LayerSite::CopiedIn);
    CHECK(kept[4].site == LayerSite::Cpu);
}

TEST_CASE("layer schedule: op offload builds each CPU layer while the device computes the layers before, from the pass's start",
          "[layer_pipeline]") {
    // Four device layers, then four CPU layers copied in, each built by the host first (a host
    // second a layer, longer than its copy, shorter than a device layer's compute).
    std::vector<LayerWork> layers = first_resident(8, 4);
    for (int l = 4; l < 8; ++l) layers[l] = {LayerSite::Cpu, false};
    const std::vector<LayerWork> offloaded = op_offloaded(layers, {});
    const Timing t{0.5, 1.0, 1.0};
    const auto steps = layer_schedule(offloaded, 2);
    // The device layers' computes are queued before the host builds the first CPU layer, so the
    // device never waits: eight computes back to back.
    CHECK(simulate(steps, offloaded, 2, t) == Approx(8 * 1.0));
    CHECK(steps.front() == PipelineStep{PipelineStep::Compute, 0, -1});
    // Filling both slots at the pass's start, as copies from DRAM do, the device waits two builds.
    std::vector<LayerWork> eager = offloaded;
    for (LayerWork& w : eager) w.host_built = false;
    const auto eager_steps = layer_schedule(eager, 2);
    CHECK(eager_steps.front().kind == PipelineStep::Copy);
    for (LayerWork& w : eager) w.host_built = w.site == LayerSite::CopiedIn;  // what the host then does
    CHECK(simulate(eager_steps, eager, 2, t) > simulate(steps, offloaded, 2, t) + 1.5);
}
