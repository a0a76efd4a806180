#include <catch2/catch.hpp>

#include "planner/plan.h"
#include "tests/support/run_command.h"

using namespace strata;
using strata::test::run_strata;

TEST_CASE("strata plan: a catalog dry run prints a table, and JSON that loads as a plan", "[unit][planner]") {
    const auto table = run_strata("plan --shape llama3-70b --weight-type Q4_K --gpu rtx4090 --dram 64G --nvme gen4");
    REQUIRE(table.exit_code == 0);
    CHECK(table.out.find("bottleneck") != std::string::npos);
    CHECK(table.out.find("rounding loss") != std::string::npos);

    const auto json = run_strata("plan --shape opt-30b --machine flexgen-t4 --workload prompt=512,gen=32,batch=64,objective=throughput --json");
    REQUIRE(json.exit_code == 0);
    const planner::Plan p = planner::Plan::from_json(json.out);
    CHECK(p.n_layer == 48);
    CHECK(p.workload.objective == planner::Objective::Throughput);
    CHECK(p.policy.batch <= 64);
}

TEST_CASE("strata plan: bad requests fail with one line and a hint", "[unit][planner]") {
    const auto unknown = run_strata("plan --shape gpt-9");
    CHECK(unknown.exit_code == 1);
    CHECK(unknown.err.find("hint: catalog shapes:") != std::string::npos);
    const auto too_big = run_strata("plan --shape llama3-405b --gpu rtx4090 --dram 64G --nvme-size 400G");
    CHECK(too_big.exit_code == 1);
    CHECK(too_big.err.find("more is needed") != std::string::npos);
    const auto mixed = run_strata("plan --shape llama3-8b --hw /nonexistent.json --gpu t4");
    CHECK(mixed.exit_code == 1);
}
