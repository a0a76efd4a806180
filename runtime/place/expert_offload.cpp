#include "runtime/place/expert_offload.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/bytes.h"
#include "core/error.h"
#include "core/log.h"

#include "planner/expert_placement.h"
#include "planner/op_offload.h"
#include "runtime/place/placement.h"

namespace strata::runtime {

std::vector<bool> offloaded_layers(const ResidencyInput& in, const OverrideRequest& overrides) {
    const size_t n = in.layer_bytes.size();
    std::vector<bool> out(n, false);
    if (in.n_expert == 0) return out;
    uint64_t all = in.fixed_bytes + in.other_bytes;
    for (uint64_t b : in.layer_bytes) all += b;
    const bool fits = in.budget == 0 || all <= in.budget;
    for (size_t il = 0; il < n; ++il) {
        const auto& asked = il < overrides.experts.size() ? overrides.experts[il] : std::nullopt;
        // Experts given to the device whole stay where the budget puts the rest.
        out[il] = asked && *asked != planner::Tier::Gpu ? *asked == planner::Tier::Nvme : !fits;
    }
    return out;
}

void plan_expert_offload(Placement& p, const ResidencyInput& in, const planner::Workload& wl,
                         const std::vector<bool>& offloaded) {
    const int slots = expert_cache_slots(in, offloaded);
    const planner::ExpertPlan x = planner::place_experts(p.shape, p.routing ? &*p.routing : nullptr, p.routing_note, slots,
                                                         in.expert_slot_bytes, offloaded);
    planner::Budgets b = planner::default_budgets(p.hw);
    if (in.budget) b.dram = static_cast<double>(in.budget);
    p.plan = planner::expert_offload_plan(p.shape, p.hw, wl, b, p.shape.kv_type, x, offloaded);
    p.plan.model_weight_bytes = p.shape.total_weight_bytes();
}

void place_experts_on_device(Placement& p, const OverrideRequest& overrides,
                             uint64_t device_bytes, uint64_t expert_bytes) {
    const int n_layer = p.shape.n_layer;
    planner::DeviceExperts want;
    want.layers.assign(static_cast<size_t>(n_layer), false);
    want.host_only.assign(static_cast<size_t>(n_layer), false);
    int n_whole = 0;
    for (int il = 0; il < n_layer && static_cast<size_t>(il) < overrides.experts.size(); ++il) {
        if (!overrides.experts[il]) continue;
        if (*overrides.experts[il] == planner::Tier::Gpu) want.layers[il] = true, ++n_whole;
        else want.host_only[il] = true;
    }
    const uint64_t whole_bytes = uint64_t(n_whole) * uint64_t(p.shape.n_expert) * expert_bytes;
    if (whole_bytes > device_bytes)
        throw OutOfBudget(fmt::format("--override-tensor gives the device every expert of {} layers ({}), but {} of its "
                                      "memory is left beside the attention weights, the KV cache and activations",
                                      n_whole, format_bytes(whole_bytes), format_bytes(device_bytes)),
                          "give more with --gpu-mem, or fewer layers' experts to the device");
    want.slots = expert_bytes ? static_cast<int32_t>((device_bytes - whole_bytes) / expert_bytes) : 0;
    p.plan = planner::with_experts_on_gpu(p.plan, p.shape, p.hw, p.routing ? &*p.routing : nullptr, p.routing_note, want);
    p.residency.experts.preload = p.plan.experts.dram;
}

namespace {
// The experts `p`'s device holds in `left` bytes, if any.
void hold_experts(Placement& p, const OverrideRequest& overrides, uint64_t left, const DeviceRoom& room) {
    if (room.experts_fit && left > 0) place_experts_on_device(p, overrides, left, room.expert_bytes);
}

// Why op offload cannot run here, or empty.
std::string op_offload_blocked(const DeviceRoom& room) {
    if (!room.experts_fit) return "the device's kernels do not run these experts";
    if (room.slot_bytes >= room.left)
        return fmt::format("the device has no room for its two buffers of the largest layer ({}) beside the attention "
                           "weights, the KV cache and activations ({} left)",
                           format_bytes(room.slot_bytes), format_bytes(room.left));
    // The host rebuilds the layers it copies in pinned buffers, at least one of the largest layer.
    if (room.dram_left < room.slot_bytes / 2)
        return fmt::format("the DRAM budget has {} left, less than a buffer of the largest layer ({}) for its copies",
                           format_bytes(room.dram_left), format_bytes(room.slot_bytes / 2));
    return "";
}
}  // namespace

void place_beside_attention(Placement& p, const OverrideRequest& overrides, const OpOffloadMode& mode, int32_t max_rows,
                            const DeviceRoom& room, double max_decode_step_s) {
    settle_op_offload(p, mode, max_rows);
    if (const std::string blocked = op_offload_blocked(room); p.op_offload_rows > 0 && !blocked.empty()) {
        if (mode.kind != OpOffloadMode::Auto) STRATA_LOG_WARN("{}: not run: {}", p.op_offload_why, blocked);
        p.op_offload_rows = 0;
        p.op_offload_why = blocked;
    }
    const Placement before = p;  // no expert held yet
    if (p.op_offload_rows > 0 && mode.kind == OpOffloadMode::Auto) {
        // The slots take room that would hold experts: weighed for the workload both ways, each
        // priced with the experts it holds, for one sequence's prompt (the runtime offloads each
        // sequence's passes; a batch's prediction leaves op offload out).
        Placement without = before;
        without.op_offload_rows = 0;
        hold_experts(without, overrides, room.left, room);
        std::string lost;
        try {
            hold_experts(p, overrides, room.left - room.slot_bytes, room);
            const planner::Workload& wl = p.plan.workload;
            const auto one_sequence = [&](const planner::Plan& q) {
                Placement run = p;
                run.plan = q;
                run.op_offload_rows = 0;
                return run.predict(wl.prompt_len, wl.gen_len, 1).total_s;
            };
            p.op_offload_rows = planner::rows_if_slots_pay(p.shape, p.hw, p.plan, without.plan, max_rows, one_sequence);
            if (p.op_offload_rows > 0 && max_decode_step_s > 0 && p.plan.prediction.decode.time_s > max_decode_step_s)
                lost = fmt::format("the {} its buffers would take holds routed experts instead, the plan searched "
                                   "again to decode no slower than the CPU alone",
                                   format_bytes(room.slot_bytes));
            else if (p.op_offload_rows <= 0)
                lost = planner::choose_op_offload(p.shape, p.hw, p.plan, max_rows).min_rows <= 0
                           ? "the CPU is predicted faster in every pass beside the experts the device holds"
                           : fmt::format("the {} its buffers would take holds routed experts instead, predicted faster "
                                         "for this workload",
                                         format_bytes(room.slot_bytes));
        } catch (const OutOfBudget&) {
            lost = "the experts --override-tensor gives the device need the room of its buffers";
        }
        if (!lost.empty()) {
            p = std::move(without);
            p.op_offload_why = lost;
        }
    } else if (p.op_offload_rows > 0) {
        try {
            hold_experts(p, overrides, room.left - room.slot_bytes, room);
        } catch (const OutOfBudget& e) {
            throw OutOfBudget(fmt::format("{} (op offload's two buffers, {}, take their room first)", e.what(),
                                          format_bytes(room.slot_bytes)),
                              "leave op offload to the planner (--op-offload auto) or turn it off, or give more --gpu-mem");
        }
    } else {
        hold_experts(p, overrides, room.left, room);
    }
    // Layers whose every expert the device now holds have nothing to copy in: where none is left,
    // the slots' room holds experts too.
    p.op_offload = planner::choose_op_offload(p.shape, p.hw, p.plan, max_rows);
    if (p.op_offload_rows > 0 && p.op_offload.runs.empty()) {
        const std::string why = p.op_offload_why;
        p = before;
        p.op_offload_rows = 0;
        p.op_offload_why = why + ": no layer is left to copy, the device holding every expert";
        hold_experts(p, overrides, room.left, room);
        p.op_offload = planner::choose_op_offload(p.shape, p.hw, p.plan, max_rows);
    }
    p.plan.experts.op_offload_rows = p.op_offload_rows;
    if (p.op_offload_rows > 0) p.plan.prediction.used.gpu += static_cast<double>(room.slot_bytes);
    if (room.experts_fit && room.expert_bytes > 0) {
        const uint64_t left = room.left - (p.op_offload_rows > 0 ? room.slot_bytes : 0);
        STRATA_LOG_INFO("experts: {} of device memory left beside attention, the KV cache and activations{}: room for {} "
                        "routed experts of {}",
                        format_bytes(left), p.op_offload_rows > 0 ? " (and op offload's buffers)" : "", left / room.expert_bytes,
                        format_bytes(room.expert_bytes));
    }
}

}  // namespace strata::runtime
