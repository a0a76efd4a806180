#pragma once
// Expert offload for a mixture of experts that does not fit DRAM: every layer's attention,
// norms, router and shared experts stay resident, and the routed experts live on NVMe with a
// DRAM cache of `cache_slots` of them. The cache is expected to hold the most chosen experts
// (its policy is frequency-weighted: runtime/weights/expert_slots.h), so the expected hit rate
// is their share of the choices: measured routing statistics (routing_profile.h) where saved,
// uniform routing otherwise (and the plan says so). Decode is priced from the active bytes a
// token reads and the misses read from NVMe (CostModel::offloaded_layer, expert_cost.cpp),
// not from the whole layers' bytes.
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "planner/expert_plan.h"
#include "planner/hardware_profile.h"
#include "planner/model_shape.h"
#include "planner/plan.h"
#include "planner/policy_search.h"
#include "planner/routing_profile.h"
#include "planner/workload.h"

namespace strata::planner {

// Routed experts held in device memory: every expert of the layers marked in `layers`
// (`--override-tensor ...exps=device`), then the `slots` most chosen of the others but those
// of the layers marked in `host_only` (`...exps=dram` or `nvme`).
struct DeviceExperts {
    int32_t slots = 0;
    std::vector<bool> layers;
    std::vector<bool> host_only;
    // Exactly these ([layer]: experts) in place of the above, when given: what a device holds
    // after it gave some back.
    std::vector<std::vector<int32_t>> held;
};

// The experts the device holds (`on_device`), those a DRAM cache of `cache_slots` slots of
// `slot_bytes` is expected to hold (the most chosen of the `offloaded` layers' others together;
// `offloaded` empty: every layer) and what a decode token then reads. `routing` null: uniform,
// `routing_note` saying why. The hit rate is over the offloaded layers' choices that are not on
// the device (the other layers' experts are resident).
ExpertPlan place_experts(const ModelShape& shape, const RoutingProfile* routing, const std::string& routing_note,
                         int32_t cache_slots, uint64_t slot_bytes, const std::vector<bool>& offloaded = {},
                         const DeviceExperts& on_device = {});

// One routed expert's bytes (its three matrices) in the largest layer, as the shape counts them.
uint64_t expert_bytes(const ModelShape& shape);

// The expert slots that fit `dram` bytes beside the output head, embeddings, every layer's
// resident part, the KV cache of the workload and the prefill working set (as the cost model
// counts them); 0 when not even that fits.
int32_t expert_slots_for(const ModelShape& shape, const Workload& wl, DType kv_type, double dram, uint64_t slot_bytes);

// A plan that offloads the experts of the `offloaded` layers (empty: all) as `experts` says
// (those layers nvme(cpu), the others dram(cpu); KV in DRAM, CPU attention), priced on `hw` for `wl`.
Plan expert_offload_plan(const ModelShape& shape, const HardwareProfile& hw, const Workload& wl, const Budgets& budgets,
                         DType kv_type, const ExpertPlan& experts, const std::vector<bool>& offloaded = {});

// For a mixture of experts: the expert-offload plan for budgets.dram (on the CPU: hw's GPU is
// search_with_expert_offload's) when it predicts less time per token than `best` (null: no plan
// fits otherwise) or nullopt.
std::optional<Plan> offload_if_better(const ModelShape& shape, const HardwareProfile& hw, const Workload& wl,
                                      const Budgets& budgets, DType kv_type, const RoutingProfile* routing,
                                      const std::string& routing_note, const Plan* best);

// search_plans, then, for a mixture of experts, the expert-offload plan in its place when it
// predicts less time per token or when no whole-layer plan fits, by the routing statistics
// saved beside the model file (shape.source; uniform for a catalog shape, the plan says so).
// A mixture of experts with a GPU is planned as the device runtime places it: that CPU plan,
// every layer's attention on the GPU, the most chosen experts in the GPU memory left.
// Throws search_plans' OutOfBudget when neither fits.
SearchResult search_with_expert_offload(const ModelShape& shape, const HardwareProfile& hw, const Workload& wl,
                                        const PlannerOptions& opts);

// `p` (an expert-offload plan, or a mixture of experts held whole in DRAM) with every layer's
// attention on hw's GPU, the KV cache there too (`kv_on_gpu`) or in DRAM with the CPU
// attending (latent attention: the GPU, over the rows copied up), and the output head there; the feed-forward stays on the CPU where p put its
// weights (expert_device.cpp). Repriced on `hw`.
Plan with_attention_on_gpu(Plan p, const ModelShape& shape, const HardwareProfile& hw, bool kv_on_gpu);
// That plan with the KV cache on the GPU when it fits p.budgets.gpu, else in DRAM; nullopt when
// not even the attention weights and head fit.
std::optional<Plan> attention_on_gpu_if_fits(const Plan& p, const ModelShape& shape, const HardwareProfile& hw);

// `p` (attention on the GPU: with_attention_on_gpu) with `want`'s experts held in GPU memory
// and computed there too (the others stay as p put them): the whole layers it names always,
// its `slots` most chosen others when that predicts less time per token. Repriced on `hw`.
Plan with_experts_on_gpu(const Plan& p, const ModelShape& shape, const HardwareProfile& hw, const RoutingProfile* routing,
                         const std::string& routing_note, const DeviceExperts& want);
// `p` (with_experts_on_gpu's) with exactly `held` ([layer]: experts) on the GPU, as a device that
// gave held experts back to the host for lack of memory runs it. Repriced on `hw`.
Plan with_held_experts(const Plan& p, const ModelShape& shape, const HardwareProfile& hw, const RoutingProfile* routing,
                       const std::string& routing_note, std::vector<std::vector<int32_t>> held);

// One line: the cache, its expected hit rate, the bytes per token, the routing assumed.
std::string expert_line(const ExpertPlan& e);
// The report's table of where each layer's experts are (groups of layers alike in one row).
std::string format_expert_plan(const ExpertPlan& e, const ModelShape& shape);

// The plan's "experts" object and back (plan.cpp). Throws UsageError naming a bad field.
nlohmann::json expert_plan_json(const ExpertPlan& e);
ExpertPlan expert_plan_from_json(const nlohmann::json& j);

}  // namespace strata::planner
