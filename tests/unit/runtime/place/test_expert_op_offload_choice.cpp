// runtime/place/expert_offload: where the device runs a mixture of experts' attention, op
// offload's two slots take the room of held experts; under --op-offload auto they are kept only
// where the plan with them is predicted faster for the workload (the toy mixture beside the toy
// device: tests/unit/planner/test_op_offload.cpp prices it by hand).
#include <catch2/catch.hpp>

#include <string>

#include "runtime/place/expert_offload.h"
#include "runtime/place/placement.h"
#include "tests/support/toy_hardware.h"
#include "tests/support/toy_moe.h"

using namespace strata;
using namespace strata::runtime;

namespace {

constexpr uint64_t kExpert = 240'000'000;  // one routed expert of the toy mixture
constexpr uint64_t kSlots = 2'000'000'000;  // two slots of its 1 GB layers

// Its attention on the toy device (10 GB/s each way), every expert on the host, for `wl`.
Placement toy_mixture(const planner::Workload& wl) {
    Placement p;
    p.shape = test::toy_moe();
    p.hw = test::toy_op_offload_machine(10);
    p.plan = test::toy_moe_plan(p.shape, p.hw, false, wl);
    return p;
}

// The device has room for 14 experts beside attention; its kernels run them.
DeviceRoom room_for_14() { return DeviceRoom{14 * kExpert + kExpert / 2, kSlots, kExpert, true}; }

const planner::Workload kLongPrompt{4096, 16, 1, planner::Objective::Latency};
const planner::Workload kLongGeneration{300, 1000, 1, planner::Objective::Latency};

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("expert op offload choice: auto keeps the slots for a long prompt and holds experts for a long generation",
          "[unit][placement][experts]") {
    Placement prompt = toy_mixture(kLongPrompt);
    place_beside_attention(prompt, {}, OpOffloadMode{}, 256, room_for_14());
    Placement decode = toy_mixture(kLongGeneration);
    place_beside_attention(decode, {}, OpOffloadMode{}, 256, room_for_14());
    REQUIRE(prompt.plan.experts.attention_on_gpu);
    INFO(prompt.op_offload_why << " / " << decode.op_offload_why);
    // The prompt's 16 passes of 256 rows run every routed expert: near a second a layer on the
    // CPU against 0.1 s copied in. The slots' 2 GB cost 8 of the 14 experts held
    // (the half expert's room left over holds a 6th).
    CHECK(prompt.op_offload_rows > 0);
    CHECK(prompt.op_offload_rows == prompt.plan.experts.op_offload_rows);
    CHECK(prompt.op_offload_why == "the planner's choice");
    CHECK(prompt.plan.experts.n_device() == 6);
    CHECK(prompt.op_offload.runs == std::vector<planner::LayerSpan>{{0, 3}});
    // Held experts save each of a thousand tokens more than the slots save a short prompt.
    CHECK(decode.op_offload_rows == 0);
    CHECK(decode.plan.experts.op_offload_rows == 0);
    CHECK(decode.plan.experts.n_device() == 14);
    CHECK(has(decode.op_offload_why, "holds routed experts instead, predicted faster for this workload"));
    // Each choice is the faster of the two for its workload, priced as the engine predicts a run.
    auto total = [](const Placement& p) {
        return p.predict(p.plan.workload.prompt_len, p.plan.workload.gen_len).total_s;
    };
    Placement prompt_off = toy_mixture(kLongPrompt);
    place_beside_attention(prompt_off, {}, OpOffloadMode{OpOffloadMode::Off}, 256, room_for_14());
    CHECK(prompt_off.plan.experts.n_device() == 14);
    CHECK(total(prompt) < total(prompt_off));
    Placement decode_on = toy_mixture(kLongGeneration);
    place_beside_attention(decode_on, {}, OpOffloadMode{OpOffloadMode::On}, 256, room_for_14());
    CHECK(decode_on.op_offload_rows == 1);
    CHECK(decode_on.plan.experts.n_device() == 6);
    CHECK(total(decode) < total(decode_on));
    // The slots are counted in the device's use.
    CHECK(prompt.plan.prediction.used.gpu - prompt_off.plan.prediction.used.gpu ==
          Approx(double(kSlots) - 8.0 * double(kExpert)));
    // Searched again to decode no slower than a bound between the two plans' decode steps (the
    // CPU alone's, where the plan with the slots decodes slower): the experts held instead.
    const double with_slots = prompt.plan.prediction.decode.time_s, without = prompt_off.plan.prediction.decode.time_s;
    REQUIRE(with_slots > without);
    Placement bounded = toy_mixture(kLongPrompt);
    place_beside_attention(bounded, {}, OpOffloadMode{}, 256, room_for_14(), (with_slots + without) / 2);
    CHECK(bounded.op_offload_rows == 0);
    CHECK(bounded.plan.experts.n_device() == 14);
    CHECK(has(bounded.op_offload_why, "searched again to decode no slower than the CPU alone"));
    // A bound the plan with them meets keeps them.
    Placement within = toy_mixture(kLongPrompt);
    place_beside_attention(within, {}, OpOffloadMode{}, 256, room_for_14(), with_slots * 1.01);
    CHECK(within.op_offload_rows == prompt.op_offload_rows);
}

TEST_CASE("expert op offload choice: no slots where the kernels, the device's room or DRAM cannot take them, and none "
          "where the device holds every expert",
          "[unit][placement][experts]") {
    auto placed = [](const OpOffloadMode& mode, DeviceRoom room) {
        Placement p = toy_mixture(kLongPrompt);
        place_beside_attention(p, {}, mode, 256, room);
        return p;
    };
    for (const OpOffloadMode& mode : {OpOffloadMode{}, OpOffloadMode{OpOffloadMode::On}}) {
        DeviceRoom no_kernels = room_for_14();
        no_kernels.experts_fit = false;
        Placement p = placed(mode, no_kernels);
        CHECK(p.op_offload_rows == 0);
        CHECK(p.op_offload_why == "the device's kernels do not run these experts");
        CHECK(p.plan.experts.n_device() == 0);

        DeviceRoom small = room_for_14();
        small.left = kSlots;  // the slots, and nothing beside them
        p = placed(mode, small);
        CHECK(p.op_offload_rows == 0);
        CHECK(has(p.op_offload_why, "the device has no room for its two buffers of the largest layer"));
        CHECK(p.plan.experts.n_device() == 8);  // the room holds experts instead

        DeviceRoom no_dram = room_for_14();
        no_dram.dram_left = kSlots / 2 - 1;  // less than a rebuild buffer of the largest layer
        p = placed(mode, no_dram);
        CHECK(p.op_offload_rows == 0);
        CHECK(has(p.op_offload_why, "the DRAM budget has"));
        CHECK(p.plan.experts.n_device() == 14);
    }
    // Room for every expert beside the slots: no layer is left to copy, and the slots' room goes
    // back to experts (--op-offload on included).
    DeviceRoom roomy = room_for_14();
    roomy.left = 16 * kExpert + kSlots;
    const Placement all = placed(OpOffloadMode{OpOffloadMode::On}, roomy);
    CHECK(all.op_offload_rows == 0);
    CHECK(has(all.op_offload_why, "no layer is left to copy, the device holding every expert"));
    CHECK(all.plan.experts.n_device() == 16);
    CHECK(all.plan.experts.op_offload_rows == 0);
}
