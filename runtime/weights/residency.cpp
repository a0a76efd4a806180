#include "runtime/weights/residency.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "core/log.h"
#include "planner/plan.h"
#include "storage/budget.h"
#include "storage/file_io.h"
#include "storage/pinned_pool.h"

namespace strata::runtime {

using planner::WeightOption;

uint64_t ring_bytes(uint64_t slot_bytes, int n_slots) {
    if (n_slots == 0) return 0;
    // As storage::PinnedPool lays it out: page-aligned slots in one huge-page-aligned mapping.
    const uint64_t stride = storage::align_up(slot_bytes, storage::kDefaultDioAlign);
    return storage::align_up(stride * static_cast<uint64_t>(n_slots), storage::kHugePageBytes);
}

int Residency::n_streamed() const {
    int n = 0;
    for (size_t il = 0; il < resident.size(); ++il) n += streamed(static_cast<int>(il));
    return n;
}

int ring_slots(const ResidencyInput& in) {
    return std::min(static_cast<int>(in.layer_bytes.size()), std::max(1, in.prefetch_depth + 1));
}

uint64_t full_ring_bytes(const ResidencyInput& in) {
    const uint64_t largest = in.layer_bytes.empty() ? 0 : *std::max_element(in.layer_bytes.begin(), in.layer_bytes.end());
    return ring_bytes(largest, ring_slots(in));
}

namespace {

// A mixture of experts' least weights beside the head: every layer's other tensors and a
// cache of one layer's experts (0 for a dense model).
uint64_t least_expert_offload_bytes(const ResidencyInput& in) {
    if (in.expert_slot_bytes == 0) return 0;
    uint64_t dense = 0;
    for (uint64_t b : in.dense_bytes) dense += b;
    return dense + ring_bytes(in.expert_slot_bytes, in.n_expert);
}

bool experts_least(const ResidencyInput& in) {
    return in.expert_slot_bytes != 0 && least_expert_offload_bytes(in) < full_ring_bytes(in);
}

// The least the layers can run in, beside the head and embeddings, and what that is in words:
// the streaming ring, a mixture of experts' other tensors with a cache of one layer's experts,
// or every layer resident where that is less still (a tiny model beside a ring of whole huge pages).
std::pair<std::string, uint64_t> least_layer_bytes(const ResidencyInput& in) {
    uint64_t resident = 0;
    for (uint64_t b : in.layer_bytes) resident += b;
    const uint64_t streamed = experts_least(in) ? least_expert_offload_bytes(in) : full_ring_bytes(in);
    if (resident <= streamed) return {fmt::format("every layer resident {}", format_bytes(resident)), resident};
    if (experts_least(in))
        return {fmt::format("the layers' other tensors with a cache of one layer's {} experts {}", in.n_expert, format_bytes(streamed)),
                streamed};
    return {fmt::format("{} streaming buffers {}", ring_slots(in), format_bytes(streamed)), streamed};
}

}  // namespace

uint64_t least_weight_bytes(const ResidencyInput& in) { return in.fixed_bytes + least_layer_bytes(in).second; }

namespace {
// The drafting engine's part of what a budget holds, named where there is one.
std::string beside_part(const ResidencyInput& in) {
    return in.beside_bytes ? fmt::format(", the drafting engine beside the model ({})", format_bytes(in.beside_bytes)) : "";
}
}  // namespace

void check_min_budget(const ResidencyInput& in, uint64_t need) {
    if (in.budget == 0 || in.budget >= need) return;
    const std::string weights = least_layer_bytes(in).first;
    throw OutOfBudget(fmt::format("the DRAM budget of {} is too small: the output head and embeddings take {}, "
                                  "the KV cache with its spill buffers, activations and staging buffers {}{}, and {}",
                                  format_bytes(in.budget), format_bytes(in.fixed_bytes),
                                  format_bytes(in.other_bytes - in.beside_bytes), beside_part(in), weights),
                      fmt::format("use --dram {} or more, a smaller context (--ctx), or less read-ahead (--prefetch){}",
                                  format_bytes_at_least(need), in.beside_bytes ? ", or draft without an engine (--spec lookup)" : ""));
}

namespace {

// The layers' resident bytes: of those whose experts are cached, all but the experts.
uint64_t layers_resident(const ResidencyInput& in, const std::vector<bool>& cached) {
    uint64_t b = 0;
    for (size_t il = 0; il < in.layer_bytes.size(); ++il) b += cached[il] ? in.dense_bytes[il] : in.layer_bytes[il];
    return b;
}

// Every layer's resident part and the expert cache of plan.experts.
Residency expert_residency(const planner::Plan& plan, const ResidencyInput& in) {
    const size_t n = in.layer_bytes.size();
    if (in.dense_bytes.size() != n || in.expert_slot_bytes == 0)
        throw UsageError("the plan offloads routed experts, but this model has none",
                         "make a plan for this model with `strata plan -m MODEL`");
    Residency r;
    r.resident.assign(n, true);
    r.on_device.assign(n, false);
    r.on_cpu.assign(n, false);
    r.experts_cached.assign(n, false);
    r.expert_slot_bytes = in.expert_slot_bytes;
    r.experts.n_slots = plan.experts.cache_slots;
    r.experts.preload = plan.experts.dram;
    r.resident_bytes = in.fixed_bytes;
    for (size_t il = 0; il < n; ++il) {
        r.experts_cached[il] = plan.layers[il].weights == WeightOption::NvmeCpu;
        r.resident_bytes += r.experts_cached[il] ? in.dense_bytes[il] : in.layer_bytes[il];
    }
    r.total_bytes = r.resident_bytes + in.other_bytes + ring_bytes(in.expert_slot_bytes, r.experts.n_slots);
    if (r.experts.n_slots < in.n_expert)
        throw UsageError(fmt::format("the plan's expert cache holds {} experts, fewer than the {} one layer may choose",
                                     r.experts.n_slots, in.n_expert),
                         "make a new plan with more DRAM (`strata plan --dram SIZE -o FILE`)");
    if (in.budget != 0 && r.total_bytes > in.budget)
        throw OutOfBudget(fmt::format("the plan's expert cache of {} experts ({}) with the layers' resident weights ({}), "
                                      "the output head and embeddings ({}) and the KV cache, activations and staging buffers ({}) is {}, "
                                      "over the DRAM budget of {}",
                                      r.experts.n_slots, format_bytes(ring_bytes(in.expert_slot_bytes, r.experts.n_slots)),
                                      format_bytes(r.resident_bytes - in.fixed_bytes), format_bytes(in.fixed_bytes),
                                      format_bytes(in.other_bytes), format_bytes(r.total_bytes), format_bytes(in.budget)),
                          fmt::format("use --dram {} or more, or let Strata plan for this budget (no --plan)",
                                      format_bytes_at_least(r.total_bytes)));
    return r;
}

}  // namespace

int expert_cache_slots(const ResidencyInput& in, const std::vector<bool>& cached) {
    const int most = static_cast<int>(std::count(cached.begin(), cached.end(), true)) * in.n_expert;
    if (in.budget == 0 || in.expert_slot_bytes == 0) return most;
    const uint64_t dense = layers_resident(in, cached);
    const uint64_t held = in.fixed_bytes + in.other_bytes + dense;
    // The least: one layer's experts, which one pass may choose.
    const uint64_t need = held + ring_bytes(in.expert_slot_bytes, in.n_expert);
    if (in.budget < need)
        throw OutOfBudget(fmt::format("the DRAM budget of {} is too small to offload the experts: the output head and "
                                      "embeddings take {}, the layers' attention, norms, routers and shared experts (and experts kept whole) {}, the "
                                      "KV cache, activations and staging buffers {}, and a cache of one layer's {} experts {}",
                                      format_bytes(in.budget), format_bytes(in.fixed_bytes), format_bytes(dense),
                                      format_bytes(in.other_bytes), in.n_expert,
                                      format_bytes(ring_bytes(in.expert_slot_bytes, in.n_expert))),
                          fmt::format("use --dram {} or more, or a smaller context (--ctx)", format_bytes_at_least(need)));
    // The pool rounds its mapping up to a huge page: keep that much aside.
    const uint64_t room = in.budget - held - storage::kHugePageBytes;
    const uint64_t stride = storage::align_up(in.expert_slot_bytes, storage::kDefaultDioAlign);
    return static_cast<int>(std::min<uint64_t>(most, std::max<uint64_t>(in.n_expert, room / stride)));
}

Residency residency_from_plan(const planner::Plan& plan, const ResidencyInput& in, bool gpu) {
    const int n = static_cast<int>(in.layer_bytes.size());
    if (static_cast<int>(plan.layers.size()) != n)
        throw UsageError(fmt::format("the plan places {} layers, but the model has {}", plan.layers.size(), n),
                         "make a plan for this model with `strata plan -m MODEL`");
    if (plan.has_gpu && !gpu)
        throw UsageError(fmt::format("the plan is for a machine with a GPU ({}), but this runtime runs on the CPU only",
                                     plan.hardware),
                         "make the plan for this machine: `strata plan -m MODEL` without --gpu, --machine or --hw");
    // The runtime streams layers and spills KV layers (runtime/place/run_layout.cpp); a plan that
    // put anything else on NVMe still runs, with that part held in DRAM and counted against the budget.
    std::vector<std::string> held;
    if (planner::tier_of(plan.output) == planner::Tier::Nvme) held.push_back("output layer");
    if (planner::tier_of(plan.embedding) == planner::Tier::Nvme) held.push_back("embedding table");
    if (!held.empty())
        STRATA_LOG_WARN("placement: the plan keeps the {} on NVMe; this runtime holds it in DRAM",
                        fmt::join(held, ", "));
    if (plan.experts.enabled) {
        if (gpu)
            throw UsageError("the plan offloads routed experts, which the device backends do not run yet",
                             "run it on the CPU (--device cpu)");
        return expert_residency(plan, in);
    }

    Residency r;
    r.resident.assign(static_cast<size_t>(n), true);
    r.on_device.assign(static_cast<size_t>(n), false);
    r.on_cpu.assign(static_cast<size_t>(n), false);
    r.resident_bytes = in.fixed_bytes;
    for (int il = 0; il < n; ++il) {
        const size_t l = static_cast<size_t>(il);
        const WeightOption w = plan.layers[l].weights;
        if (!gpu && planner::device_of(w) == planner::Device::Gpu)
            throw UsageError(fmt::format("the plan sends layer {}'s weights to a GPU ({}), but this runtime runs on the CPU only",
                                         il, planner::option_name(w)),
                             "make the plan for this machine: `strata plan -m MODEL` without --gpu, --machine or --hw");
        if (gpu) r.on_cpu[l] = planner::device_of(w) == planner::Device::Cpu;
        if (w == WeightOption::Gpu) {
            r.resident[l] = false;
            r.on_device[l] = true;
        } else if (planner::tier_of(w) == planner::Tier::Dram) {
            r.resident_bytes += in.layer_bytes[l];
        } else {
            r.resident[l] = false;
            r.slot_bytes = std::max(r.slot_bytes, in.layer_bytes[l]);
        }
    }
    const int streamed = r.n_streamed();
    r.n_slots = streamed ? std::min(streamed, std::max(1, in.prefetch_depth + 1)) : 0;
    r.total_bytes = r.resident_bytes + in.other_bytes + ring_bytes(r.slot_bytes, r.n_slots);
    if (in.budget != 0 && r.total_bytes > in.budget) {
        const auto on_device = std::count(r.on_device.begin(), r.on_device.end(), true);
        throw PlanOverBudget(fmt::format("the plan keeps {} of {} layers resident in DRAM{}: with the output head and embeddings ({}), "
                                      "the KV cache, activations and staging buffers ({}){} and {} streaming buffers ({}) that is {}, "
                                      "over the DRAM budget of {}",
                                      std::count(r.resident.begin(), r.resident.end(), true), n,
                                      on_device ? fmt::format(" ({} on the device)", on_device) : "", format_bytes(in.fixed_bytes),
                                      format_bytes(in.other_bytes - in.beside_bytes), beside_part(in), r.n_slots,
                                      format_bytes(ring_bytes(r.slot_bytes, r.n_slots)),
                                      format_bytes(r.total_bytes), format_bytes(in.budget)),
                          fmt::format("use --dram {} or more, or a plan that streams more layers "
                                      "(`strata plan --dram-budget SIZE -o FILE`)",
                                      format_bytes_at_least(r.total_bytes)));
    }
    return r;
}

}  // namespace strata::runtime
