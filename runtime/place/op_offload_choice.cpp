#include "runtime/place/op_offload_choice.h"

#include <charconv>

#include <fmt/format.h>

#include "core/log.h"
#include "planner/units.h"
#include "runtime/place/placement.h"

namespace strata::runtime {

std::optional<OpOffloadMode> parse_op_offload(std::string_view s) {
    if (s == "auto") return OpOffloadMode{};
    if (s == "on") return OpOffloadMode{OpOffloadMode::On};
    if (s == "off") return OpOffloadMode{OpOffloadMode::Off};
    int32_t rows = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), rows);
    if (ec != std::errc() || end != s.data() + s.size() || rows < 1) return std::nullopt;
    return OpOffloadMode{OpOffloadMode::Rows, rows};
}

void settle_op_offload(Placement& p, const OpOffloadMode& mode, int32_t max_rows) {
    p.max_pass_rows = max_rows;
    p.op_offload = planner::choose_op_offload(p.shape, p.hw, p.plan, max_rows);
    p.op_offload_rows = 0;
    if (p.op_offload.runs.empty()) return;
    switch (mode.kind) {
        case OpOffloadMode::Off: p.op_offload_why = "--op-offload off"; return;
        case OpOffloadMode::On: p.op_offload_rows = 1, p.op_offload_why = "--op-offload on"; return;
        case OpOffloadMode::Rows:
            if (mode.rows > max_rows) {
                // No pass is that long: nothing would be copied in, and its buffers (a mixture of
                // experts') would take held experts' room for nothing.
                p.op_offload_why = fmt::format("--op-offload {}: more rows than a pass holds ({})", mode.rows, max_rows);
                STRATA_LOG_WARN("{}; no pass is copied in", p.op_offload_why);
                return;
            }
            p.op_offload_rows = mode.rows, p.op_offload_why = fmt::format("--op-offload {}", mode.rows);
            return;
        case OpOffloadMode::Auto:
            p.op_offload_rows = p.op_offload.min_rows;
            p.op_offload_why = p.op_offload_rows > 0 ? "the planner's choice"
                                                     : fmt::format("the CPU is predicted faster in every pass up to {} rows", max_rows);
            return;
    }
}

std::string describe_op_offload(const Placement& p) {
    if (p.op_offload.runs.empty()) return {};
    const planner::OpOffloadPrice at_max = planner::price_op_offload(p.shape, p.hw, p.plan, p.max_pass_rows);
    const std::string layers = (p.plan.experts.attention_on_gpu ? "the routed experts of layers " : "CPU layers ") +
                               planner::format_runs(p.op_offload.runs);
    // Where the device's copies of layers in DRAM come from, as priced (CostModel::op_offloaded).
    const double rebuild = p.hw.cpu.untile_gbps_for(p.shape.weight_type);
    const std::string copies = rebuild > 0 ? fmt::format("layers in DRAM rebuilt from the CPU's tiles at {:.1f} GB/s", rebuild)
                                           : std::string("layers read from the model file (no rebuild rate measured)");
    const std::string priced = fmt::format("a {}-row pass: {} on the device, {} on the CPU; {}", p.max_pass_rows,
                                           planner::format_seconds(at_max.device_s), planner::format_seconds(at_max.cpu_s), copies);
    if (p.op_offload_rows <= 0) return fmt::format("prefill   {} computed on the CPU in every pass ({}; {})", layers, p.op_offload_why, priced);
    const planner::Workload& wl = p.plan.workload;
    // A batch's prompts go through in passes too, but its prediction leaves the saving out
    // (Placement::predict): no TTFT is claimed for it.
    if (wl.batch > 1)
        return fmt::format("prefill   {} computed on the device in prompt passes of {}+ rows ({}; {}); the prediction for "
                           "a batch of {} leaves what it saves out",
                           layers, p.op_offload_rows, p.op_offload_why, priced, wl.batch);
    const double saved = planner::op_offload_saving_s(p.shape, p.hw, p.plan, wl.prompt_len, p.max_pass_rows, p.op_offload_rows);
    const planner::Prediction with = planner::with_saving(p.plan.prediction, saved, wl);
    const double cpu_ttft = p.plan.prediction.ttft_s;
    return fmt::format("prefill   {} computed on the device in prompt passes of {}+ rows ({}; {}); predicted TTFT {} for "
                       "{} prompt tokens ({:.0f} t/s), {} with them on the CPU",
                       layers, p.op_offload_rows, p.op_offload_why, priced, planner::format_seconds(with.ttft_s),
                       wl.prompt_len, wl.prompt_len / with.ttft_s, planner::format_seconds(cpu_ttft));
}

}  // namespace strata::runtime
