// runtime/place/model_file_rate: where a run may stream, and the model file's reads set against
// the probe's at the ring's depth (the rate itself is never asserted: a disk's varies).
#include <catch2/catch.hpp>

#include <fstream>
#include <vector>

#include "planner/plan.h"
#include "runtime/place/model_file_rate.h"
#include "storage/file_io.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/skip.h"

using namespace strata;
using namespace strata::runtime;

namespace {
std::filesystem::path file_of(const char* name, size_t bytes) {
    const auto path = test::temp_path(name);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    const std::vector<char> data(bytes, 'w');
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    return path;
}
}  // namespace

TEST_CASE("model file rate: a run may stream where its layers exceed the budget, experts are cached or a plan says so",
          "[unit][placement]") {
    ResidencyInput in;
    in.fixed_bytes = 10, in.other_bytes = 10, in.layer_bytes = {40, 40};
    CHECK_FALSE(may_stream(in, nullptr));  // no budget
    in.budget = 100;
    CHECK_FALSE(may_stream(in, nullptr));  // 100 bytes fit
    in.budget = 99;
    CHECK(may_stream(in, nullptr));
    in.budget = 0;
    in.expert_slot_bytes = 8;
    CHECK(may_stream(in, nullptr));
    in.expert_slot_bytes = 0;
    planner::Plan plan;
    plan.layers = {{0, planner::WeightOption::DramCpu, planner::KvOption::Dram, planner::Device::Cpu},
                   {1, planner::WeightOption::DramCpu, planner::KvOption::Dram, planner::Device::Cpu}};
    CHECK_FALSE(may_stream(in, &plan));
    plan.layers[1].weights = planner::WeightOption::NvmeCpu;
    CHECK(may_stream(in, &plan));
}

TEST_CASE("model file rate: the file's reads against the probe's curve at the reader's depth", "[unit][placement]") {
    constexpr double MiB = 1u << 20;
    planner::DiskProfile disk;
    disk.read_gbps = 1e6;
    // A curve no disk reaches: the file's reads are a small share of it.
    disk.read_depth_curve = {{1 * MiB, 1e5}, {32 * MiB, 1e6}};
    const auto big = file_of("model_file_rate.bin", 16u << 20);
    if (!storage::File::open_read(big).direct()) {
        measure_model_file_reads(disk, big);
        CHECK(disk.model_file_scale == 1);  // the page cache would answer: not measured
        STRATA_SKIP("no O_DIRECT on the temp directory's filesystem: the rate is not measured");
    }
    measure_model_file_reads(disk, big);
    CHECK(disk.model_file_scale > 0);
    CHECK(disk.model_file_scale < 0.01);  // under 10 TB/s at the curve's 1 PB/s-ish
    planner::DiskProfile small = disk;
    small.model_file_scale = 1;
    measure_model_file_reads(small, file_of("model_file_rate_small.bin", 1u << 20));
    CHECK(small.model_file_scale == 1);  // too little to time
    planner::DiskProfile missing = small;
    measure_model_file_reads(missing, test::temp_path("model_file_rate_missing.bin"));
    CHECK(missing.model_file_scale == 1);  // logged, priced at the probe's rate
}
