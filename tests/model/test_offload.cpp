// Streaming layers from the model file under a DRAM budget changes speed, never tokens, and
// the process stays within the budget plus a fixed overhead.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "tests/support/gguf_writer.h"
#include "tests/support/model_paths.h"
#include "tests/support/run_command.h"
#include "tests/support/trace_file.h"

using namespace strata;
using nlohmann::json;

// Binary, shared libraries, tokenizer tables and metadata: what the budget does not cover.
constexpr uint64_t kFixedOverhead = 32ull << 20;
// Under AddressSanitizer the process also holds shadow memory and freed blocks in quarantine,
// so its peak RSS says nothing about the engine's budget: the bound is checked in plain builds.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kRssMeasured = false;
#else
constexpr bool kRssMeasured = true;
#endif
static void check_peak_rss(const json& run, uint64_t limit) {
    if (kRssMeasured) CHECK(run["memory"]["peak_rss_bytes"].get<uint64_t>() <= limit);
    else WARN("peak RSS not checked: AddressSanitizer build");
}

// A --trace file's slices counted by track name.
static std::map<std::string, int> slices_per_track(const std::filesystem::path& trace) {
    std::map<std::string, int> slices;
    for (const test::TraceSlice& s : test::read_trace(trace)) ++slices[s.track];
    return slices;
}

TEST_CASE("SmolLM2: the same tokens whether every layer is resident or most are streamed", "[model][offload]") {
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "the default SmolLM2 model (run scripts/fetch_model.sh)");
    auto run = [](const std::string& dram) {
        auto r = test::run_strata("generate --json --temp 0.7 --seed 5 -n 32 --ctx 512 -p 'The lighthouse keeper' " +
                                  (dram.empty() ? std::string() : "--dram " + dram));
        INFO(r.err);
        REQUIRE(r.exit_code == 0);
        return json::parse(r.out);
    };
    const json all = run("");
    CHECK(all["memory"]["layers_streamed"] == 0);
    // The pread thread pool, where io_uring is unavailable, streams the same bytes.
    auto pread = test::run_command("STRATA_IO=pread " + test::strata_binary().string() +
                                   " generate --json --temp 0.7 --seed 5 -n 32 --ctx 512 -p 'The lighthouse keeper' --dram 70M");
    REQUIRE(pread.exit_code == 0);
    CHECK(json::parse(pread.out)["tokens"] == all["tokens"]);
    for (const std::string dram : {"100M", "70M"}) {
        const json part = run(dram);
        INFO("--dram " << dram);
        CHECK(part["memory"]["layers_streamed"].get<int>() > 0);
        CHECK(part["memory"]["bytes_streamed"].get<uint64_t>() > 0);
        CHECK(part["tokens"] == all["tokens"]);
        const uint64_t budget = std::stoull(dram) << 20;
        check_peak_rss(part, budget + kFixedOverhead);
    }
}

TEST_CASE("SmolLM2: KV cache layers spilled to disk give the same tokens", "[model][offload]") {
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "the default SmolLM2 model (run scripts/fetch_model.sh)");
    auto run = [](const std::string& extra) {
        auto r = test::run_strata("generate --json --temp 0.7 --seed 5 -n 24 --ctx 4096 -p 'The lighthouse keeper' " + extra);
        INFO(r.err);
        REQUIRE(r.exit_code == 0);
        return json::parse(r.out);
    };
    const json all = run("");
    const auto trace = test::temp_path("offload_trace.json");
    const json spilled = run("--dram 70M --kv-spill " + test::temp_path("kv").string() + " --trace " + trace.string());
    CHECK(all["memory"]["kv_layers_spilled"] == 0);
    CHECK(spilled["memory"]["kv_layers_spilled"].get<int>() > 20);
    CHECK(spilled["tokens"] == all["tokens"]);
    check_peak_rss(spilled, (70ull << 20) + kFixedOverhead);
    CHECK_FALSE(std::filesystem::exists(test::temp_path("kv")));  // the spill file is gone, and the folder made for it
    // The spill's disk traffic is on the trace: its reads and its write-backs, each on its own track.
    const auto slices = slices_per_track(trace);
    const auto on = [&](const std::string& suffix) {
        return std::find_if(slices.begin(), slices.end(), [&](const auto& s) {
            return s.first.rfind("disk: ", 0) == 0 && s.first.ends_with(suffix);
        });
    };
    REQUIRE(on("KV spill reads") != slices.end());
    REQUIRE(on("KV spill writes") != slices.end());
    // Each of the 24 steps reads back and writes back every spilled layer.
    const int spilled_layers = spilled["memory"]["kv_layers_spilled"].get<int>();
    CHECK(on("KV spill reads")->second >= spilled_layers * 20);
    CHECK(on("KV spill writes")->second >= spilled_layers * 20);
}

TEST_CASE("SmolLM2: a budget below the minimum is refused with the minimum named", "[model][offload]") {
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "the default SmolLM2 model (run scripts/fetch_model.sh)");
    auto r = test::run_strata("generate -p hi --ctx 512 --dram 20M");
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("DRAM budget of 20 MiB is too small") && Catch::Contains("use --dram"));
}

TEST_CASE("SmolLM2: --trace of a streamed model on the simulated device shows the disk queue and the device's streams",
          "[model][offload]") {
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "the default SmolLM2 model (run scripts/fetch_model.sh)");
    const auto trace = test::temp_path("disk_queue_trace.json");
    // DRAM with room beside the device's staging but not for the layers the device leaves, so
    // that some stream whatever the probe measured (at 120M a quick probe's plan held them all).
    auto r = test::run_strata("generate --json -n 8 --ctx 512 -p 'The lighthouse keeper' --device sim --gpu-mem 100M "
                              "--dram 80M --trace " + trace.string());
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(json::parse(r.out)["memory"]["layers_streamed"].get<int>() > 0);
    auto slices = slices_per_track(trace);
    const auto disk = std::find_if(slices.begin(), slices.end(), [](const auto& s) { return s.first.rfind("disk: ", 0) == 0; });
    REQUIRE(disk != slices.end());
    // Every streamed layer of every pass is one read: more reads than passes.
    CHECK(disk->second > 8);
    CHECK(slices["sim: compute"] > 0);
    CHECK(slices["sim: h2d"] > 0);
}
