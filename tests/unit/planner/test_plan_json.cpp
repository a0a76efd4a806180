#include <catch2/catch.hpp>

#include "core/error.h"
#include "planner/catalog.h"
#include "planner/expert_placement.h"
#include "planner/plan_report.h"
#include "planner/policy_search.h"
#include "planner/workload.h"
#include "tests/support/dry_run_specs.h"

using namespace strata;
using namespace strata::planner;

using test::gpu_spec;
using test::system_spec;

namespace {
Plan sample_plan(ModelShape& shape) {
    shape = ModelShape::from_catalog("llama3-70b", DType::Q4_K);
    const HardwareProfile hw = profile_from_catalog(gpu_spec("rtx4090", 64ull << 30));
    PlannerOptions o;
    o.budgets = default_budgets(hw);
    o.kv_types = {DType::F16, DType::Q8_0};
    return make_plan(shape, hw, Workload{512, 128, 2, Objective::Latency}, o);
}
}  // namespace

TEST_CASE("plans round-trip through JSON exactly", "[unit][planner]") {
    ModelShape shape;
    const Plan p = sample_plan(shape);
    const Plan back = Plan::from_json(p.to_json());
    CHECK(back == p);
    CHECK(back.to_json() == p.to_json());
    CHECK_NOTHROW(back.check_matches(shape));
    CHECK(layer_runs(p).size() >= 1);
    const std::string report = format_plan(p, shape, profile_from_catalog(gpu_spec("rtx4090")), {1, 0.1});
    CHECK(report.find("bottleneck") != std::string::npos);
    // The policy's CPU attention is the device's layers attending beside it, named so (a CPU
    // layer attends on the CPU whatever it says); a plan without a device has no such choice.
    CHECK(report.find("CPU attention beside the device") != std::string::npos);
    Plan cpu_only = p;
    cpu_only.has_gpu = false;
    CHECK(format_plan(cpu_only, shape, profile_from_catalog(gpu_spec("rtx4090")), {1, 0.1}).find("CPU attention") == std::string::npos);
}

TEST_CASE("a mixture of experts' plan keeps where its experts go, and how many a layer has", "[unit][planner]") {
    // Mixtral 8x7B at Q4_K (26 GB) on a CPU with 16 GB of DRAM: the experts are offloaded to NVMe.
    const ModelShape shape = ModelShape::from_catalog("mixtral-8x7b", DType::Q4_K);
    const HardwareProfile hw = profile_from_catalog(gpu_spec("none", 16ull << 30));
    PlannerOptions o;
    o.budgets = default_budgets(hw);
    const Plan p = search_with_expert_offload(shape, hw, Workload{512, 128, 1, Objective::Latency}, o).best;
    REQUIRE(p.experts.enabled);
    CHECK(p.experts.n_expert == 8);
    CHECK(p.experts.dram.size() == static_cast<size_t>(shape.n_layer));
    const Plan back = Plan::from_json(p.to_json());
    CHECK(back == p);
    CHECK(back.experts.n_expert == 8);
}

TEST_CASE("malformed or mismatched plans are rejected with a clear error", "[unit][planner]") {
    ModelShape shape;
    const Plan p = sample_plan(shape);
    const std::string good = p.to_json();
    CHECK_THROWS_AS(Plan::from_json("not json"), UsageError);
    CHECK_THROWS_WITH(Plan::from_json("{}"), Catch::Contains("not a Strata plan"));
    CHECK_THROWS_WITH(Plan::from_json(R"({"strata_plan": 99})"), Catch::Contains("version 99, and this Strata reads version 1"));

    auto with = [&](const std::string& from, const std::string& to) {
        std::string j = good;
        const size_t at = j.find(from);
        REQUIRE(at != std::string::npos);
        return j.replace(at, from.size(), to);
    };
    CHECK_THROWS_WITH(Plan::from_json(with("\"weights\": \"gpu\"", "\"weights\": \"floppy\"")), Catch::Contains("floppy"));
    CHECK_THROWS_WITH(Plan::from_json(with("\"n_layer\": 80", "\"n_layer\": 81")), Catch::Contains("81-layer"));
    CHECK_THROWS_WITH(Plan::from_json(with("\"n_micro\": ", "\"n_micro\": 3, \"x\": ")), Catch::Contains("n_micro"));
    CHECK_THROWS_WITH(Plan::from_json(with("\"ttft_s\"", "\"ttft\"")), Catch::Contains("ttft_s"));

    const ModelShape other = ModelShape::from_catalog("llama3-8b", DType::Q4_K);
    CHECK_THROWS_WITH(p.check_matches(other), Catch::Contains("was made for 'llama3-70b'"));
    CHECK_THROWS_AS(evaluate_plan(other, profile_from_catalog(gpu_spec("rtx4090")), p.workload, p), UsageError);
    CHECK_THROWS_AS(evaluate_plan(shape, profile_from_catalog(gpu_spec("none")), p.workload, p), UsageError);
}

TEST_CASE("workload specs parse and are validated", "[unit][planner]") {
    Workload w;
    w.apply("prompt=1024,gen=64,batch=8,objective=throughput");
    CHECK(w == Workload{1024, 64, 8, Objective::Throughput});
    CHECK_THROWS_AS(w.apply("prompt=abc"), UsageError);
    CHECK_THROWS_AS(w.apply("tokens=5"), UsageError);
    CHECK_THROWS_AS(w.apply("batch=0"), UsageError);
}
