#pragma once
// `strata plan --export vllm|sglang|llama-rpc`: the way out of one box. A shell script that
// launches an existing distributed engine for the planned model and workload, sized from the
// catalog (planner/cluster_sizing.h): tensor and pipeline parallel sizes, nodes and GPUs a
// node, the model and its quantization, the context and the KV budget, with the reasoning as
// comments. Run on every node with NODE_RANK (0: the head node) and the addresses it asks for.
// Each flag it writes is one the engine defines (tests/fixtures/engine_flags/, from the
// engines' own sources, names the versions).
#include <optional>
#include <string>
#include <string_view>

#include "planner/cluster_sizing.h"
#include "planner/model_shape.h"
#include "planner/workload.h"

namespace strata::cli {

enum class LaunchEngine { Vllm, Sglang, LlamaRpc };

// "vllm", "sglang" or "llama-rpc"; nullopt for anything else.
std::optional<LaunchEngine> launch_engine(std::string_view name);
inline constexpr const char* kLaunchEngines = "vllm, sglang or llama-rpc";

struct LaunchInput {
    planner::ModelShape shape;    // as the plan read it (a GGUF header, or a catalog shape)
    planner::Workload workload;
    std::string verdict;          // what the plan found on this machine, the script's first comment
};

// The script. Throws UsageError when no cluster of the request's GPUs holds the model.
std::string launch_script(LaunchEngine engine, const LaunchInput& in, const planner::ClusterRequest& cluster);

}  // namespace strata::cli
