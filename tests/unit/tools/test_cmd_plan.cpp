#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "planner/plan.h"
#include "tests/support/gguf_writer.h"
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
    // A budget past what the tier holds would plan memory the machine does not have.
    const auto past_gpu = run_strata("plan --shape llama3-8b --gpu rtx4090 --gpu-budget 100T");
    CHECK(past_gpu.exit_code == 1);
    CHECK_THAT(past_gpu.err, Catch::Contains("--gpu-budget 100 TiB is more than rtx4090's memory (24 GiB)") &&
                                 Catch::Contains("--gpu-mem"));
    const auto no_gpu = run_strata("plan --shape llama3-8b --gpu none --gpu-budget 1G");
    CHECK(no_gpu.exit_code == 1);
    CHECK_THAT(no_gpu.err, Catch::Contains("no GPU"));
    const auto past_dram = run_strata("plan --shape llama3-8b --gpu rtx4090 --dram 16G --dram-budget 1T");
    CHECK(past_dram.exit_code == 1);
    CHECK_THAT(past_dram.err, Catch::Contains("--dram-budget 1 TiB is more than the machine's DRAM (16 GiB)"));
    const auto past_nvme = run_strata("plan --shape llama3-8b --gpu rtx4090 --nvme-size 100G --nvme-budget 1T");
    CHECK(past_nvme.exit_code == 1);
    CHECK_THAT(past_nvme.err, Catch::Contains("--nvme-budget 1 TiB is more than"));
    CHECK(run_strata("plan --shape llama3-8b --gpu rtx4090 --gpu-budget 50% --dram-budget 12G").exit_code == 0);
}

// A mixture of experts beside a GPU whose prompt's passes pay for op offload's slots: the plan's
// headline TTFT leaves the saving out (as the engine's does), and a line of its own gives the
// TTFT with it, sooner. The H200 host's profile, its CPU rebuilding the experts' layers at 30 GB/s.
TEST_CASE("strata plan: a mixture's TTFT with op offload on a line of its own", "[unit][planner][experts]") {
    std::ifstream in(std::filesystem::path(STRATA_SOURCE_DIR) / "bench/profiles/h200-xeon16.json");
    nlohmann::json profile = nlohmann::json::parse(in);
    for (auto& rate : profile["cpu"]["rates"]) rate["untile_gbps"] = 30.0;
    const auto path = test::temp_path("h200_untile30.json");
    std::ofstream(path) << profile.dump();
    const auto run = run_strata("plan --shape mixtral-8x7b --weight-type Q4_0 --hw " + path.string() +
                                " --gpu-budget 8G --workload prompt=4096,gen=128");
    REQUIRE(run.exit_code == 0);
    double headline = 0, with = 0;
    int rows = 0;
    const auto at = [&](const std::string& what) { return run.out.find(what); };
    REQUIRE(at("predicted TTFT ") != std::string::npos);
    REQUIRE(at("With op offload (prompt passes of ") != std::string::npos);
    CHECK(std::sscanf(run.out.c_str() + at("predicted TTFT "), "predicted TTFT %lf s", &headline) == 1);
    CHECK(std::sscanf(run.out.c_str() + at("With op offload"), "With op offload (prompt passes of %d+ rows on the GPU): TTFT %lf s",
                      &rows, &with) == 2);
    CHECK(rows > 4);
    CHECK(with > 0);
    CHECK(with < headline);
    CHECK_THAT(run.out, Catch::Contains(std::to_string(rows) + "+ rows copy the layers whose experts are in DRAM"));
}
