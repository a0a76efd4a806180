// `strata bench` with a batch and a depth: llama-bench's test names and JSON fields, the plan's
// prediction beside each measurement, and a clear error when the depth leaves no room; the plan
// made for the batch and prompt the command runs (`bench`, `batch`).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/gguf_writer.h"
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
    // The tiny model's size in thousands, as `strata list` gives it (not "0M").
    CHECK_THAT(table.out, Catch::Matches(R"([\s\S]*\| llama \d+K F32 [\s\S]*)"));

    const auto too_deep = run_strata("bench -m " + model.string() + " -r 1 -p 32 -n 8 -d 100 -c 64");
    CHECK(too_deep.exit_code != 0);
    CHECK_THAT(too_deep.err, Catch::Contains("-d 100 + -p 32 / -n 8 do not fit the context of 64") &&
                                 Catch::Contains("raise --ctx"));
}

TEST_CASE("CLI: strata bench decodes plain unless --spec asks, and reads the weights once a pass", "[unit][cli]") {
    const std::string m = "bench -m " + tiny_llama_path().string() + " -t 2 -r 1 -p 0 -n 48 --json";
    auto tg_row = [](const std::string& args) {
        const auto r = run_strata(args);
        INFO(r.err);
        REQUIRE(r.exit_code == 0);
        return nlohmann::json::parse(r.out.substr(0, r.out.find('\n')));
    };
    // llama-bench's tg: one token a pass, whatever the text repeats.
    CHECK(tg_row(m)["tokens_per_pass"] == 1.0);
    for (const char* spec : {" --spec off", " --spec lookup"}) {
        const auto row = tg_row(m + spec);
        const double per_pass = row["tokens_per_pass"];
        CHECK(per_pass >= 1.0);
        const double want = row["weight_bytes_per_token"].get<double>() * row["avg_ts"].get<double>() / per_pass / 1e9;
        CHECK(row["weights_gbps"].get<double>() == Approx(want).epsilon(1e-9));
    }
}

namespace {

// What `strata ARGS` prints to stderr (--show-plan's plan), once it has run.
std::string shown_plan(const std::string& args) {
    const auto r = run_strata(args);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return r.err;
}

// The matmuls and KV cache columns of --show-plan's layer rows ("0-4         gpu       gpu      gpu ...").
struct LayerRow {
    std::string matmuls, kv;
};
std::vector<LayerRow> layer_rows(const std::string& shown) {
    constexpr size_t kMatmuls = 11 + 1 + 9 + 1, kKv = kMatmuls + 8 + 1, kKvWidth = 16;  // after layers, weights
    auto cell = [](const std::string& line, size_t at, size_t width) {
        std::string c = line.substr(at, width);
        c.erase(c.find_last_not_of(' ') + 1);
        return c;
    };
    std::vector<LayerRow> rows;
    std::istringstream lines(shown);
    for (std::string line; std::getline(lines, line);) {
        if (line.empty() || !std::isdigit(static_cast<unsigned char>(line[0])) || line.size() < kKv + kKvWidth) continue;
        rows.push_back({cell(line, kMatmuls, 8), cell(line, kKv, kKvWidth)});
    }
    return rows;
}

}  // namespace

TEST_CASE("CLI: strata bench plans for its batch and prompt: a batch's KV cache leaves the device", "[unit][cli][placement]") {
    const std::string m = "bench -m " + tiny_llama_path().string() + " -t 2 -r 1 -p 8 -n 4 --show-plan ";
    // Each sequence's context of 8192 positions (640 bytes each): one sequence's KV cache (5 MiB)
    // fits the simulated device's 100 MiB beside its working set (about 50 MiB), sixteen
    // sequences' (80 MiB) does not. One sequence attending on the device keeps its KV cache
    // beside every layer the device computes. (Which layers those are is the probe's call: with
    // a full probe of a fast CPU these tiny layers run on the CPU, attending there to KV in DRAM.)
    const std::string sim = m + "-c 8192 --device sim --gpu-mem 100M -b ";
    const std::string one = shown_plan(sim + "1 --attention gpu");
    CHECK_THAT(one, Catch::Contains("workload  prompt 8, generate 4, 1 sequence,"));
    const std::vector<LayerRow> rows_one = layer_rows(one);
    REQUIRE_FALSE(rows_one.empty());
    for (const LayerRow& row : rows_one)
        if (row.matmuls == "gpu") CHECK(row.kv == "gpu");

    const std::string batch = shown_plan(sim + "16");
    CHECK_THAT(batch, Catch::Contains("workload  prompt 8, generate 4, 16 sequences,") &&
                          Catch::Contains("policy    16 sequences per pass"));
    const std::vector<LayerRow> rows_batch = layer_rows(batch);
    REQUIRE_FALSE(rows_batch.empty());
    // Not all of it on the device (the device backend then holds the whole cache in DRAM).
    CHECK_FALSE(std::all_of(rows_batch.begin(), rows_batch.end(), [](const LayerRow& row) { return row.kv == "gpu"; }));

    // The depth is part of each sequence's prompt.
    CHECK_THAT(shown_plan(m + "-b 2 -d 40"), Catch::Contains("workload  prompt 48, generate 4, 2 sequences,"));
}

TEST_CASE("CLI: strata batch plans for the sequences it runs at once", "[unit][cli][placement]") {
    const auto input = temp_path("batch_plan_in.jsonl"), output = temp_path("batch_plan_out.jsonl");
    {
        std::ofstream in(input);
        for (int i = 0; i < 3; ++i)
            in << R"({"custom_id": "r)" << i << R"(", "method": "POST", "url": "/v1/completions", )"
               << R"("body": {"prompt": "Once", "max_tokens": 2, "temperature": 0}})" << "\n";
    }
    auto plan_for = [&](int max_batch) {
        std::filesystem::remove(output);
        return shown_plan("batch -m " + tiny_llama_path().string() + " -t 2 -c 256 --show-plan -i " + input.string() +
                          " -o " + output.string() + " --max-batch " + std::to_string(max_batch));
    };
    // Fewer requests than --max-batch: all of them at once; else --max-batch at once.
    CHECK_THAT(plan_for(8), Catch::Contains(", 3 sequences, objective"));
    CHECK_THAT(plan_for(2), Catch::Contains(", 2 sequences, objective"));
}
