#pragma once
// Prefill with op offload (llama.cpp's, for a large batch): a pass of many rows copies the
// layers a device plan computes on the CPU into the device's ring of slots and computes them
// there, each layer's copy overlapping the compute of the one before, while a decode pass
// keeps them on the CPU; for a mixture of experts whose attention runs on the device, the layers
// whose routed experts the host holds, every routed expert the pass chose computed on the
// device. Whether it pays is a matter of the pass's rows: the copy of a layer's weights costs
// the same at any row count, the CPU's matmuls grow with the rows. Priced from the same figures
// as every plan (the probe's CPU and device rates, the link's).
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "planner/hardware_profile.h"
#include "planner/model_shape.h"
#include "planner/plan.h"

namespace strata::planner {

// Consecutive layers, first to last, whatever their placement.
struct LayerSpan {
    int32_t first = 0, last = 0;
    bool operator==(const LayerSpan&) const = default;
};

// The plan's layers a long pass copies to the device, in runs: those whose matmuls run on the
// CPU beside it; for a mixture of experts whose attention runs there, those whose routed experts
// the host holds in DRAM.
std::vector<LayerSpan> op_offload_layer_runs(const ModelShape& shape, const Plan& plan);
// "12-23, 30"
std::string format_runs(std::span<const LayerSpan> runs);

// Those layers in one pass of `rows` prompt rows, both ways (a mixture of experts': their
// feed-forward on the host, or copied in with every routed expert computed on the device).
struct OpOffloadPrice {
    double cpu_s = 0;     // computed by the CPU where they lie (streamed ones read from the disk beside it)
    double device_s = 0;  // copied to the device and computed there: the first copy, then per
                          // layer the longer of its copy (for one held in DRAM, overlapping its
                          // rebuild as the file lays it out from the CPU's tiles) and its compute (with
                          // its K/V going down into the host's cache in DRAM and the rows it
                          // attends to coming back up), and at least the disk's time for every
                          // streamed layer's read
};
// (`before`: the prompt's rows in the passes before this one, whose K/V the pass's attention
// copies up with its own.)
OpOffloadPrice price_op_offload(const ModelShape& shape, const HardwareProfile& hw, const Plan& plan, int32_t rows,
                                int32_t before = 0);

struct OpOffload {
    std::vector<LayerSpan> runs;  // the layers copied in (op_offload_layer_runs)
    // Passes of at least this many rows compute them on the device: the fewest rows from which
    // the device is predicted faster at every row count up to the largest pass, and more than a
    // decode pass's kCpuGemvTokens (the runtime offloads a pass only for a prompt run); 0: at none.
    int32_t min_rows = 0;
    double ttft_s = 0;  // the plan's first token for its workload's prompt with op offload as chosen
};
// `max_rows`: the rows of the runtime's largest pass (a longer prompt goes in passes of it).
// Without CPU layers or a device, no runs and min_rows 0.
OpOffload choose_op_offload(const ModelShape& shape, const HardwareProfile& hw, const Plan& plan, int32_t max_rows);
// What a prompt of `prompt_len` tokens saves (negative: loses), in passes of at most
// `max_rows`, where passes of `min_rows` or more compute the CPU layers on the device (0: none do).
double op_offload_saving_s(const ModelShape& shape, const HardwareProfile& hw, const Plan& plan, int32_t prompt_len,
                           int32_t max_rows, int32_t min_rows);

// A mixture of experts beside a device: op offload's two slots against more experts held in
// their room. `with` holds the experts the room beside the slots takes, `without` those the whole
// room does; `total_s` prices a plan's workload for one sequence, op offload left out. The rows
// from which prompts' passes copy the layers in, where `with` and what op offload saves its
// workload's prompt beat `without`; else 0.
int32_t rows_if_slots_pay(const ModelShape& shape, const HardwareProfile& hw, const Plan& with, const Plan& without,
                          int32_t max_rows, const std::function<double(const Plan&)>& total_s);

// A prediction whose prefill takes `saved_s` less (its first token, its total and the rates
// that follow from them), for `wl`.
Prediction with_saving(Prediction p, double saved_s, const Workload& wl);

}  // namespace strata::planner
