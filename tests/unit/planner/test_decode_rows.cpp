// A decode step that computes several rows of one sequence (a speculative pass verifying a
// draft) against one of as many sequences: the rows cost what as many tokens do, the sequence's
// KV cache is read and held once.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "planner/cost_model.h"
#include "tests/support/toy_hardware.h"
#include "tests/support/toy_shape.h"

using namespace strata;
using namespace strata::planner;

namespace {
constexpr int C = static_cast<int>(Stream::CpuCompute), R = static_cast<int>(Stream::Dram);

Workload rows_of_one(int32_t rows) {
    Workload wl{100, 11, 1, Objective::Latency};
    wl.decode_rows = rows;
    return wl;
}
}  // namespace

TEST_CASE("cost model: a decode step of 4 rows of one sequence computes 4 rows and reads its KV once", "[unit][planner]") {
    const ModelShape s = test::toy_shape();  // 8 KV heads of 128, one query head each; 4 KiB of KV a token
    HardwareProfile hw = test::toy_cpu();
    // 1 ns per K/V value of a tile, 0.5 ns per query row and value.
    hw.cpu.attention_tile = AttentionTileCost{{{DType::F16, 1.0}}, 0.5, 0, 0, 0};
    const Policy one{1, 1, true, false, DType::F16}, four{4, 1, true, false, DType::F16};
    const CostModel tree(s, hw, rows_of_one(4), one);
    const CostModel batch(s, hw, rows_of_one(1), four);
    const CostModel single(s, hw, rows_of_one(1), one);

    // The weights and the output layer: four rows either way.
    CHECK(tree.layer_weights(0, WeightOption::DramCpu).decode == batch.layer_weights(0, WeightOption::DramCpu).decode);
    CHECK(tree.output(WeightOption::DramCpu).decode == batch.output(WeightOption::DramCpu).decode);

    // The KV cache: one sequence's held and read (105.5 positions on average), four entries written.
    const Cost kt = tree.layer_kv(0, KvOption::Dram), kb = batch.layer_kv(0, KvOption::Dram);
    CHECK(kt.bytes[1] == Approx(single.layer_kv(0, KvOption::Dram).bytes[1]));
    CHECK(kt.decode[R] == Approx((105.5 + 4) * 4096 / 20e9));
    CHECK(kb.decode[R] == Approx(4 * (105.5 + 1) * 4096 / 20e9));
    // Attention: each KV head's tile holds the four rows, one pass over the keys with four rows'
    // products; four sequences take four tiles a KV head.
    const double keys = 105.5 * 128e-9;
    CHECK(kt.decode[C] == Approx(8 * keys * (1 + 4 * 0.5)));
    CHECK(kb.decode[C] == Approx(32 * keys * (1 + 0.5)));
}

TEST_CASE("cost model: 17 rows over weights streamed from disk cost what one row does while the disk is slower",
          "[unit][planner]") {
    const ModelShape s = test::toy_shape();  // 1 GB layers: 0.5 s each from the toy's 2 GB/s disk
    const HardwareProfile hw = test::toy_cpu();
    Plan p;
    p.n_layer = 4;
    for (int i = 0; i < 4; ++i) p.layers.push_back({i, WeightOption::NvmeCpu, KvOption::Dram, Device::Cpu});
    p.output = WeightOption::DramCpu;
    p.hidden = HiddenOption::Dram;
    RuntimeLimits ring;
    ring.stream_slots = 3;
    auto decode_s = [&](int32_t rows) {
        return CostModel(s, hw, rows_of_one(rows), Policy{1, 1, true, false, DType::F16}, ring).predict(p).decode.time_s;
    };
    // 17 rows' arithmetic (0.17 s a layer at 100 GFLOPS) hides under each layer's read.
    CHECK(decode_s(1) == Approx(4 * 0.5).epsilon(0.05));
    CHECK(decode_s(17) == Approx(decode_s(1)).epsilon(0.05));
    // Where the rows' arithmetic outlasts the read it sets the pace: 100 rows take 1 s a layer.
    CHECK(decode_s(100) > 1.5 * decode_s(1));
}

TEST_CASE("workload: a decode step verifies at least one row per sequence", "[unit][planner]") {
    CHECK_THROWS_AS(rows_of_one(0).validate(), UsageError);
    CHECK_NOTHROW(rows_of_one(17).validate());
}
