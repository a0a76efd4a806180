// plan_svg: one pipelined decode step drawn as lanes of bars (part of plan_report.h).
#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "planner/cost_model.h"
#include "planner/expert_placement.h"
#include "planner/plan_report.h"
#include "planner/units.h"

namespace strata::planner {

namespace {
struct Bar {
    int lane;
    double t0, t1;
    int32_t layer;
};
constexpr int kLanes = 6;
constexpr const char* kLaneNames[kLanes] = {"NVMe", "DRAM", "PCIe H2D", "CPU", "GPU", "PCIe D2H"};
constexpr const char* kLaneColors[kLanes] = {"#8c6bb1", "#9ecae1", "#fdae6b", "#74c476", "#3182bd", "#fd8d3c"};
}  // namespace

std::string plan_svg(const Plan& plan, const ModelShape& shape, const HardwareProfile& hw) {
    const CostModel cm(shape, hw, plan.workload, plan.policy);
    // A simple list schedule in layer order: every lane is a queue; a layer's H2D waits for its
    // NVMe read, its compute for its H2D and the previous layer's compute, its D2H for its compute.
    std::vector<Bar> bars;
    std::array<double, kLanes> free_at{};
    double compute_done = 0;
    auto put = [&](int lane, double ready, double len, int32_t layer) {
        const double t0 = std::max(ready, free_at[static_cast<size_t>(lane)]);
        if (len > 0) bars.push_back({lane, t0, t0 + len, layer});
        free_at[static_cast<size_t>(lane)] = t0 + len;
        return t0 + len;
    };
    for (const auto& l : plan.layers) {
        const Cost c = cm.placed_layer(plan, l);
        const auto& s = c.decode;
        const double nvme_done = put(0, 0, s[static_cast<int>(Stream::Nvme)], l.layer);
        put(1, 0, s[static_cast<int>(Stream::Dram)], l.layer);
        const double h2d_done = put(2, nvme_done, s[static_cast<int>(Stream::PcieH2D)], l.layer);
        const double cpu_done = put(3, std::max(h2d_done, compute_done), s[static_cast<int>(Stream::CpuCompute)], l.layer);
        const double gpu_done = put(4, std::max(h2d_done, compute_done), s[static_cast<int>(Stream::GpuCompute)], l.layer);
        compute_done = std::max(cpu_done, gpu_done) + c.decode_overhead;
        put(5, compute_done, s[static_cast<int>(Stream::PcieD2H)], l.layer);
    }
    double end = 0;
    for (const auto& b : bars) end = std::max(end, b.t1);
    end = std::max(end, 1e-9);

    const double left = 90, width = 900, lane_h = 34, top = plan.experts.enabled || plan.experts.attention_on_gpu ? 56 : 40;
    const double height = top + kLanes * lane_h + 40;
    std::string svg = fmt::format(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" font-family=\"sans-serif\" font-size=\"12\">\n",
        left + width + 20, height);
    svg += fmt::format("<text x=\"{}\" y=\"20\" font-size=\"14\">{}: one decode step from cold, {} (steady state with prefetch across steps: {})</text>\n", left,
                       shape.name, format_seconds(end), format_seconds(plan.prediction.decode.time_s));
    if (plan.experts.enabled || plan.experts.attention_on_gpu)
        svg += fmt::format("<text x=\"{}\" y=\"38\">{}</text>\n", left, expert_line(plan.experts));
    for (int lane = 0; lane < kLanes; ++lane) {
        const double y = top + lane * lane_h;
        svg += fmt::format("<text x=\"4\" y=\"{:.1f}\">{}</text>\n", y + lane_h * 0.6, kLaneNames[lane]);
        svg += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"{}\" height=\"{:.1f}\" fill=\"#f4f4f4\"/>\n", left, y + 2, width, lane_h - 4);
    }
    for (const auto& b : bars) {
        const double x = left + width * b.t0 / end, w = std::max(0.5, width * (b.t1 - b.t0) / end);
        svg += fmt::format("<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" fill=\"{}\" stroke=\"white\" "
                           "stroke-width=\"0.3\"><title>layer {}: {}</title></rect>\n",
                           x, top + b.lane * lane_h + 4, w, lane_h - 8, kLaneColors[b.lane], b.layer, format_seconds(b.t1 - b.t0));
    }
    for (int i = 0; i <= 5; ++i) {
        const double x = left + width * i / 5;
        svg += fmt::format("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1:.1f}\" y2=\"{2:.1f}\" stroke=\"#999\"/>"
                           "<text x=\"{0:.1f}\" y=\"{3:.1f}\" text-anchor=\"middle\">{4}</text>\n",
                           x, top, top + kLanes * lane_h, top + kLanes * lane_h + 16, format_seconds(end * i / 5));
    }
    svg += "</svg>\n";
    return svg;
}

}  // namespace strata::planner
