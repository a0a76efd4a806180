// `strata bench` with a batch and a depth: llama-bench's test names and JSON fields, the plan's
// prediction beside each measurement, and a clear error when the depth leaves no room.
#include <catch2/catch.hpp>

#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/support/model_paths.h"
#include "tests/support/run_command.h"

using namespace strata::test;

TEST_CASE("CLI: strata bench -b -d runs batched tests at a depth and prints the plan's prediction", "[unit][cli]") {
    const std::filesystem::path model = tiny_llama_path();
    const std::string m = "bench -m " + model.string() + " -t 2 -r 1 -p 32 -n 8 -b 3 -d 16";
    const auto r = run_strata(m + " --json");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    std::istringstream lines(r.out);
    std::vector<nlohmann::json> rows;
    for (std::string line; std::getline(lines, line);) rows.push_back(nlohmann::json::parse(line));
    REQUIRE(rows.size() == 2);
    CHECK(rows[0]["test"] == "pp32 x3 @ d16");
    CHECK(rows[1]["test"] == "tg8 x3 @ d16");
    for (const auto& row : rows) {
        CHECK(row["batch"] == 3);
        CHECK(row["depth"] == 16);
        CHECK(row["avg_ts"].get<double>() > 0);
        CHECK(row["predicted_ts"].get<double>() > 0);
    }

    const auto table = run_strata(m);
    REQUIRE(table.exit_code == 0);
    CHECK_THAT(table.out, Catch::Contains(" tg8 x3 @ d16 |") && Catch::Contains("plan's prediction for these runs:"));

    const auto too_deep = run_strata("bench -m " + model.string() + " -r 1 -p 32 -n 8 -d 100 -c 64");
    CHECK(too_deep.exit_code != 0);
    CHECK_THAT(too_deep.err, Catch::Contains("-d 100 + -p 32 / -n 8 do not fit the context of 64") &&
                                 Catch::Contains("raise --ctx"));
}
