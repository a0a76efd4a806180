// `strata plan`: a dry run of the planner. Builds the hardware profile (file, catalog parts or
// this machine), the model shape (GGUF header or catalog) and the workload, searches the
// policies, and prints the chosen placement with its predicted speed, or the plan as JSON.
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "core/error.h"
#include "planner/plan_report.h"
#include "planner/units.h"
#include "tools/cli_options.h"
#include "tools/plan/plan_hardware.h"
#include "tools/plan/plan_inputs.h"
#include "tools/server/plan_ui.h"

namespace strata::cli {

using namespace strata::planner;

namespace {

void write_file(const std::string& path, const std::string& text, const char* what) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) throw IoError(fmt::format("cannot write the {} to '{}'", what, path));
}

}  // namespace

int run_plan(const PlanOptions& o) {
    if (o.ui) return server::run_plan_ui(o);
    const PlanRun run = run_planner(o, load_hardware(o));
    const SearchResult& r = run.result;
    const ModelShape& shape = run.shape;
    const HardwareProfile& hw = run.hw;
    const std::string json = r.best.to_json();
    if (!o.out.empty()) write_file(o.out, json + "\n", "plan");
    if (!o.svg.empty()) write_file(o.svg, plan_svg(r.best, shape, hw), "timeline SVG");
    if (o.json) {
        std::cout << json << "\n";
        return 0;
    }
    std::cout << format_plan(r.best, shape, hw, {r.n_policies, r.seconds});
    if (o.frontier) {
        fmt::print("\nfrontier (no other policy is faster per sequence and in aggregate):\n");
        fmt::print("{:>6} {:>6} {:>5} {:>9} {:>5} {:>10} {:>14} {:>12}\n", "batch", "micro", "KV", "cpu attn", "rc", "TTFT",
                   "tok/s per seq", "tok/s total");
        for (const Plan& p : frontier(r))
            fmt::print("{:>6} {:>6} {:>5} {:>9} {:>5} {:>10} {:>14.3g} {:>12.3g}\n", p.policy.batch, p.policy.n_micro,
                       dtype_name(p.policy.kv_type), p.policy.cpu_attention ? "on" : "off", p.policy.recompute ? "on" : "off",
                       format_seconds(p.prediction.ttft_s), p.prediction.decode_tps_per_seq, p.prediction.throughput_tps);
    }
    return 0;
}

}  // namespace strata::cli
