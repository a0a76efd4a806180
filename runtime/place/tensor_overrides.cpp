#include "runtime/place/tensor_overrides.h"

#include <algorithm>
#include <regex>

#include <fmt/format.h>

#include "core/bytes.h"
#include "core/error.h"
#include "core/log.h"
#include "models/gguf_file.h"

namespace strata::runtime {

namespace {

std::optional<planner::Tier> tier_named(std::string_view s) {
    if (s == "device" || s == "gpu" || s == "cuda" || s == "CUDA0") return planner::Tier::Gpu;
    if (s == "dram" || s == "cpu" || s == "CPU") return planner::Tier::Dram;
    if (s == "nvme" || s == "disk") return planner::Tier::Nvme;
    return std::nullopt;
}

// "blk.12.ffn_up_exps.weight" -> 12 and whether it is a routed expert tensor; -1 outside layers.
int layer_of(const std::string& name, bool& expert) {
    expert = name.find("_exps.") != std::string::npos;
    if (name.rfind("blk.", 0) != 0) return -1;
    return std::atoi(name.c_str() + 4);
}

}  // namespace

TensorOverride parse_tensor_override(std::string_view spec) {
    const size_t eq = spec.rfind('=');
    const std::string pattern(spec.substr(0, eq == std::string_view::npos ? 0 : eq));
    if (eq == std::string_view::npos || pattern.empty())
        throw UsageError(fmt::format("--override-tensor '{}' is not REGEX=TIER", spec),
                         "write a pattern and a tier, e.g. --override-tensor exps=nvme");
    const auto tier = tier_named(spec.substr(eq + 1));
    if (!tier)
        throw UsageError(fmt::format("--override-tensor '{}': unknown tier '{}'", spec, spec.substr(eq + 1)),
                         "use device, dram or nvme (gpu and cpu are accepted as llama.cpp names them)");
    try {
        std::regex check(pattern);
    } catch (const std::regex_error& e) {
        throw UsageError(fmt::format("--override-tensor '{}': '{}' is not a regular expression ({})", spec, pattern, e.what()),
                         "escape the dots and brackets: blk\\.[0-9]+\\.ffn_.*_exps=nvme");
    }
    return {pattern, *tier, std::string(spec)};
}

OverrideRequest resolve_overrides(const std::vector<TensorOverride>& overrides, const models::GgufFile& file) {
    OverrideRequest r;
    int n_layer = 0;
    for (const models::TensorInfo& t : file.tensors()) {
        bool expert = false;
        n_layer = std::max(n_layer, layer_of(t.name, expert) + 1);
    }
    r.experts.resize(static_cast<size_t>(n_layer));
    r.resident.resize(static_cast<size_t>(n_layer));
    if (overrides.empty()) return r;
    const bool has_experts = std::any_of(file.tensors().begin(), file.tensors().end(),
                                         [](const models::TensorInfo& t) { return t.name.find("_exps.") != std::string::npos; });
    std::vector<std::regex> res;
    for (const TensorOverride& o : overrides) res.emplace_back(o.pattern);
    std::vector<int> matched(overrides.size(), 0);
    for (const models::TensorInfo& t : file.tensors()) {
        size_t i = 0;
        while (i < res.size() && !std::regex_search(t.name, res[i])) ++i;
        if (i == res.size()) continue;  // placed by the plan
        ++matched[i];
        const planner::Tier tier = overrides[i].tier;
        const std::string spec = fmt::format("--override-tensor {}", overrides[i].given);
        bool expert = false;
        const int il = layer_of(t.name, expert);
        if (tier != planner::Tier::Dram && !has_experts)
            throw UsageError(fmt::format("{}: matches '{}'; this model has no routed experts, the only tensors placed on "
                                         "the {} by name", spec, t.name, tier == planner::Tier::Gpu ? "device" : "NVMe"),
                             "the planner places whole layers: give budgets (--gpu-mem, --dram), or keep tensors in "
                             "DRAM with =dram");
        if (tier == planner::Tier::Gpu && (!expert || il < 0))
            throw UsageError(fmt::format("{}: matches '{}'; of the tensors, only routed experts are placed on the device by "
                                         "name", spec, t.name),
                             "a mixture of experts keeps every layer's attention, norms and router on the device; give "
                             "it experts with e.g. --override-tensor 'blk\\.[0-3]\\.ffn_.*_exps=device'");
        if (tier == planner::Tier::Nvme && !expert)
            throw UsageError(fmt::format("{}: matches '{}', which is not a routed expert tensor", spec, t.name),
                             "only routed experts (ffn_*_exps) are placed on NVMe by name; whole layers stream "
                             "from the model file when --dram is too small for them");
        if (il < 0) continue;  // output head, embeddings, norms: always in DRAM here
        if (!expert) {
            r.resident[il].push_back(t.name);
            continue;
        }
        auto& at = r.experts[il];
        if (at && *at != tier)
            throw UsageError(fmt::format("{}: layer {}'s expert tensors are given different tiers", spec, il),
                             "a layer's ffn_gate_exps, ffn_up_exps and ffn_down_exps go to one tier together");
        at = tier;
        if (tier == planner::Tier::Dram) r.resident[il].push_back(t.name);  // its layer must not stream
    }
    for (size_t i = 0; i < overrides.size(); ++i)
        if (!matched[i]) r.unmatched.push_back(overrides[i].given);
    return r;
}

void warn_unmatched_overrides(const OverrideRequest& request, const models::GgufFile& file) {
    for (const std::string& given : request.unmatched)
        STRATA_LOG_WARN("--override-tensor {}: matches no tensor of {} (patterns are searched in the GGUF tensor names: "
                        "`strata inspect MODEL` lists them)",
                        given, file.path().filename().string());
}

void check_resident_overrides(const OverrideRequest& request, const std::vector<bool>& streamed, uint64_t budget) {
    for (size_t il = 0; il < request.resident.size() && il < streamed.size(); ++il)
        if (streamed[il] && !request.resident[il].empty())
            throw OutOfBudget(fmt::format("--override-tensor keeps '{}' in DRAM, but with --dram {} the plan streams layer {} "
                                          "from the model file",
                                          request.resident[il][0], format_bytes(budget), il),
                              "give more --dram, or drop that override");
}

bool asks_device(const OverrideRequest& request) {
    return std::any_of(request.experts.begin(), request.experts.end(),
                       [](const auto& t) { return t == planner::Tier::Gpu; });
}

}  // namespace strata::runtime
