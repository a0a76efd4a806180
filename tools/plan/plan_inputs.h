#pragma once
#include <optional>
// What `strata plan` and `POST /v1/plan` share: the plan options (flags, or a request body)
// turned into the model shape, the catalog hardware and the workload, and the policy search
// over them. Both print the chosen plan with Plan::to_json, so they answer alike. (The
// command's other hardware sources, a profile file or a probe, are in plan_hardware.h.)
#include <cstdint>
#include <filesystem>
#include <string>

#include "planner/catalog.h"
#include "planner/hardware_profile.h"
#include "planner/model_shape.h"
#include "planner/policy_search.h"
#include "planner/workload.h"
#include "core/error.h"
#include "tools/cli_options.h"

namespace strata::cli {

struct PlanRun {
    planner::ModelShape shape;
    planner::HardwareProfile hw;
    planner::SearchResult result;
    // With a GPU: the CPU alone's best plan, weighed against the device's; `result` is the
    // CPU alone's when the device's does not beat it (device_prediction: what the device's said).
    std::optional<planner::Prediction> cpu_alone, device_prediction;
    // The best device plan's, where it decoded slower than the CPU alone and the plan shown is
    // the one searched again to decode no slower (planner::trades_decode_for_prefill).
    std::optional<planner::Prediction> unbounded_device;
    // Why `result` is the CPU alone's though the GPU held the model: no device plan runs in the
    // DRAM budget beside the device backend's host buffers (empty otherwise).
    std::string gpu_left_out;
};

// The model (a GGUF header or a catalog shape, its KV cache in `kv`), the workload, and the
// first KV type the options name ("auto": F16 first), each throwing UsageError naming a bad option.
planner::ModelShape plan_shape(const PlanOptions& o, DType kv);
planner::Workload plan_workload(const PlanOptions& o);
DType plan_kv_type(const PlanOptions& o);
// The GGUF file planned for when the plan is for this machine (no catalog parts, no --hw file),
// as the runtime will run it; empty otherwise.
std::filesystem::path local_model_file(const PlanOptions& o);
// Whether a size given (--dram) is 0: no limit, as the engine's commands take it (the machine's
// own memory). False for an empty or malformed one (refused where it is read).
bool is_zero_size(const std::string& text);
// An installed capacity (--dram, --gpu-mem, --nvme-size) in bytes; a share ("50%") is a UsageError.
uint64_t capacity(const std::string& text, const char* flag);
// `--machine this`: this machine's probe (or --hw's profile), the parts named beside it in place of its own.
inline constexpr const char* kThisMachine = "this";
// Whether the options name catalog parts (--gpu, --machine but `this`, --cpu, --pcie, --nvme, --dram-kind).
bool names_catalog_parts(const PlanOptions& o);
// The catalog parts and capacities the options name.
planner::DryRunSpec catalog_parts(const PlanOptions& o);
// The machine those catalog parts make, with the capacities given (a dry run).
planner::HardwareProfile catalog_hardware(const PlanOptions& o);
// No device placement fits the GPU budget, but the CPU alone would hold the workload: the
// machine can run it, so the refusal names the budget (not the machine) and that way out.
class GpuBudgetTooSmall : public OutOfBudget {
    using OutOfBudget::OutOfBudget;
};

// The plan for the options' model and workload on `hw`. Throws UsageError naming the bad
// option (an unknown catalog name, a share given for a capacity, ...), GpuBudgetTooSmall,
// and OutOfBudget when no policy fits.
PlanRun run_planner(const PlanOptions& o, planner::HardwareProfile hw);

}  // namespace strata::cli
