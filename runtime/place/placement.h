#pragma once
// The plan the engine runs by. By default the planner makes it for this model (its GGUF
// header), this machine (the cached `strata probe` profile, else the catalog's generic
// desktop, so that starting never measures), the DRAM budget and a workload from the
// options; `--plan FILE` gives one instead, checked against the model. Either way it becomes
// the weight store's residency: layers in DRAM are resident, layers on NVMe are streamed.
#include <climits>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "planner/hardware_profile.h"
#include "planner/op_offload.h"
#include "planner/model_shape.h"
#include "planner/plan.h"
#include "planner/plan_report.h"
#include "planner/policy_search.h"
#include "planner/routing_profile.h"
#include "runtime/place/tensor_overrides.h"
#include "runtime/weights/residency.h"

namespace strata::models { class GgufFile; }

namespace strata::runtime {

// The device backend's ring of device buffers for the layers copied in each pass
// (DeviceBackendOptions::n_slots), as the planner prices a device step (RuntimeLimits::device_slots).
inline constexpr int kDeviceSlots = 2;

// A placement weighed against the one that runs: what it is and its prediction for the run.
struct PlanAlternative {
    std::string what;  // "the CPU alone", "the device"
    planner::Prediction prediction;
};

struct Placement {
    planner::Plan plan;  // its DRAM budget and use are the runtime's (ResidencyInput) figures
    planner::ModelShape shape;
    planner::HardwareProfile hw;
    std::string hw_source;        // where the profile came from, in words
    planner::SearchStats search;  // n_policies 0: the plan was given
    Residency residency;
    int n_kv_layers_in_dram = 0;  // the KV cache's first layers; the rest spill to disk
    int prefetch_depth = 2;       // layers (and spilled KV layers) read ahead of compute
    planner::RuntimeLimits limits;  // how the plan's prediction priced this runtime (run_limits, and a device's terms)
    // A mixture of experts: the routing statistics saved beside the model, or why there are none.
    std::optional<planner::RoutingProfile> routing;
    std::string routing_note;
    // The placement it was weighed against: the CPU alone beside a device plan, or the device
    // plan the CPU alone beat (PlacementOptions::alternative); `--show-plan` prints it.
    std::optional<PlanAlternative> alternative;
    // The workload's best device plan, where it decoded slower than the CPU alone and this one
    // was made again to decode no slower (lay_out, runtime/place/run_layout.h); `--show-plan`
    // prints it.
    std::optional<planner::Prediction> unbounded;
    // A device plan's CPU layers in a prompt's passes (runtime/place/op_offload_choice.h): the
    // planner's prices, the rows from which a pass computes them on the device (0: never), the
    // rows of the runtime's largest pass, and why (--op-offload, or the planner's choice).
    planner::OpOffload op_offload;
    int32_t op_offload_rows = 0;
    int32_t max_pass_rows = 0;
    std::string op_offload_why;

    // The plan priced on this machine for `batch` requests of these lengths decoded together,
    // each decode step computing `decode_rows` rows of each (more than one: a speculative pass
    // verifying a draft), as this runtime runs it, op offload included (the plan's own
    // prediction is for the workload it was made for).
    planner::Prediction predict(int n_prompt, int n_generated, int batch = 1, int decode_rows = 1) const;
};

struct PlacementOptions {
    const planner::Plan* given = nullptr;  // --plan FILE
    int n_ctx = 1;                         // the context the KV cache holds
    int n_predict = 0;                     // tokens generated per request, when known
    int n_prompt = 0;                      // the prompt's tokens (generate's, bench's; a turn's for chat and serve, after chat --load's)
    int n_batch = 1;                       // sequences decoded together (bench's -b, batch's)
    int kv_positions = 0;                  // the KV cache's positions for all sequences; 0: n_ctx
    int n_threads = 0;                     // the CPU threads the runtime computes on (0: every core)
    int n_threads_alone = 0;               // those it would compute on without the device (0: every core)
    std::optional<PlanAlternative> alternative;  // set on the placement made (Placement::alternative)
    int n_kv_layers_in_dram = INT_MAX;     // KV layers kept in DRAM (runtime/kv/kv_cache.h); the rest spill
    DType kv_type = DType::F32;            // the KV cache's element type
    std::function<void(const Placement&)> on_plan;  // before the budget is checked (--show-plan)
    std::vector<TensorOverride> overrides;         // --override-tensor
    // Where layers may stream, the model file's reads timed and priced at their rate
    // (runtime/place/model_file_rate.h); false: the probe's curve alone (tests of its pricing).
    bool time_model_file = true;
    ExpertPolicy expert_policy = ExpertPolicy::Adaptive;  // the expert cache's, when experts are offloaded
    double max_decode_step_s = 0;  // a device plan's decode step at most this (planner::PlannerOptions's); 0: any
};

// Per layer: whether the plan recomputes its KV from saved hidden states (the CPU backend keeps
// them in DRAM, wherever the plan put them: KvCache's rebuilt layers).
std::vector<bool> rebuilt_layers(const planner::Plan& plan);
// The cached probe, else the catalog's generic desktop with this machine's RAM, on `n_threads`
// CPU threads (0: all); any GPU is left out (the runtime computes on the CPU). Logs one line
// saying which.
planner::HardwareProfile runtime_profile(std::string& source, int n_threads = 0);
// A streamed read's share of the disk: a reader keeping this many chunks in flight gets the
// fraction of the disk's best rate below, and its reads finish in the order they were asked for
// (the layer needed next first), where deeper queues share the disk among every read and finish
// them together. The reader's default queue depth where the probe measured no depth curve.
// 0.9: a probe's points scatter by a few percent, and 0.95 sent 32 reads in flight where 4 gave
// 94.7% of the best rate; the ring's reads then finished together, and a streamed speculative
// pass's disk sat idle a fifth of the time (BENCHMARKS.md, Speculative decoding).
inline constexpr double kSaturatingRateFraction = 0.9;
unsigned stream_read_chunks(const planner::DiskProfile& disk);
// How this runtime streams layers and spilled KV (its rings, the reader's depth on `disk`, the
// spill's padded blocks) and copies layers to a device, as the planner prices them.
planner::RuntimeLimits run_limits(int prefetch_depth, const planner::ModelShape& shape, DType kv_type,
                                  const planner::DiskProfile& disk);
// GB/s the plan prices its layers streamed from NVMe at: the disk's rate with the ring's reads
// in flight (planner::DiskProfile::read_gbps_at); the deep rate when nothing is streamed.
double streamed_read_gbps(const Placement& p);
// The requests a run is planned for: n_batch sequences decoded together, each with the prompt
// of n_prompt tokens when known, else one that fills its context with the generation; the
// generation n_predict when known. A sequence's context is n_ctx, or its share of a KV cache
// the sequences share (kv_positions / n_batch) when smaller, so that the planner's KV cache,
// batch x kv_len positions, is the one the runtime holds.
planner::Workload runtime_workload(const PlacementOptions& opts);
// Throws UsageError for a given plan made for another model or for a GPU, OutOfBudget when
// the budget cannot hold the head, KV cache and ring, or what a given plan keeps resident.
// A mixture of experts that does not fit (or whose experts the overrides send to NVMe) is
// planned with expert offload (runtime/place/expert_offload.h) from the routing statistics
// saved beside the model (planner/routing_profile.h), or uniform routing without them.
Placement place(const models::GgufFile& file, const ResidencyInput& in, const PlacementOptions& opts);
// Sets p.plan (and p.search): the given plan, checked against p.shape, or the planner's best for
// p.hw and `wl` with the layers as the runtime reads them, the KV type p.shape.kv_type,
// without recomputation and with only layers on NVMe; `tune` adjusts the planner's options.
void choose_plan(Placement& p, const ResidencyInput& in, const planner::Workload& wl, const PlacementOptions& opts,
                 const std::function<void(planner::PlannerOptions&, const planner::ModelShape& as_read)>& tune);

}  // namespace strata::runtime
