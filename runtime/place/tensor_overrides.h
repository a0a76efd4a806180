#pragma once
// `--override-tensor REGEX=TIER`, as llama.cpp means it: the regular expression is searched
// for in each GGUF tensor name (std::regex_search, ECMAScript), the first pattern that matches
// a tensor decides its tier, and a tensor no pattern matches is placed as the plan says.
// Tiers: `device` (gpu, cuda), `dram` (cpu) and `nvme` (disk). This runtime places whole
// layers and, in a mixture of experts, each layer's routed experts (ffn_*_exps) apart from
// the rest, so the overrides it can honour are: routed experts on the device (every expert of
// the layer held in device memory and computed there), on NVMe (read through the expert cache)
// or in DRAM (resident, computed by the CPU), and any tensor in DRAM (its layer then must stay
// resident, which is checked against the plan). The rest is refused with the reason.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "planner/plan.h"

namespace strata::models { class GgufFile; }

namespace strata::runtime {

struct TensorOverride {
    std::string pattern;
    planner::Tier tier = planner::Tier::Dram;
    std::string given;  // the flag's value as typed, for messages ("...=device" stays "device")
};

// "REGEX=TIER" (the last '=' splits). Throws UsageError for a malformed pattern or tier.
TensorOverride parse_tensor_override(std::string_view spec);

// What the overrides ask of one model.
struct OverrideRequest {
    std::vector<std::optional<planner::Tier>> experts;  // per layer: where its routed experts must be
    std::vector<std::vector<std::string>> resident;     // per layer: other tensors asked to stay in DRAM
    std::vector<std::string> unmatched;                 // the overrides (as given) that match no tensor
};

// Resolves the overrides against the model's tensor names. Throws UsageError for what this
// runtime cannot do (the device or NVMe for a tensor other than a routed expert; one layer's
// expert tensors on different tiers).
OverrideRequest resolve_overrides(const std::vector<TensorOverride>& overrides, const models::GgufFile& file);

// Warns once for each override that matches no tensor of the model (placement resolves them
// several times, quietly).
void warn_unmatched_overrides(const OverrideRequest& request, const models::GgufFile& file);

// Whether the overrides give any layer's experts to the device.
bool asks_device(const OverrideRequest& request);

// Throws OutOfBudget when a layer the overrides keep in DRAM is streamed (`streamed` per layer).
void check_resident_overrides(const OverrideRequest& request, const std::vector<bool>& streamed, uint64_t budget);

}  // namespace strata::runtime
