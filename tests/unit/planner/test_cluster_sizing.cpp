// How many GPUs a distributed engine needs, checked against the arithmetic done by hand.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "planner/catalog.h"
#include "planner/cluster_sizing.h"
#include "planner/model_shape.h"

using namespace strata;
using namespace strata::planner;

namespace {
ClusterRequest h100s(int n_ctx, int seqs, double target = 0) {
    ClusterRequest r;
    r.gpu = *Catalog::builtin().find_gpu("h100-80g");
    r.n_ctx = n_ctx;
    r.max_seqs = seqs;
    r.target_tps = target;
    r.efficiency = Catalog::builtin().efficiency;
    return r;
}
}  // namespace

TEST_CASE("cluster sizing: the smallest group of GPUs whose memory holds weights and KV", "[unit][planner]") {
    SECTION("an 8B model in F16 fits one H100") {
        const ModelShape s = ModelShape::from_catalog("llama3-8b", DType::F16);
        const ClusterSizing c = size_cluster(s, h100s(4096, 8));
        CHECK(c.tensor_parallel == 1);
        CHECK(c.pipeline_parallel == 1);
        CHECK(c.nodes == 1);
        // KV by hand: 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes = 128 KiB a position.
        CHECK(c.kv_budget_bytes == 4096ull * 8 * 32 * 8 * 128 * 2 * 2);
        CHECK(c.per_gpu_bytes <= c.usable_per_gpu_bytes + kGpuRuntimeReserve);
    }
    SECTION("a 70B model in F16 needs a tensor-parallel group within a node") {
        const ModelShape s = ModelShape::from_catalog("llama3-70b", DType::F16);
        const ClusterSizing c = size_cluster(s, h100s(4096, 8));
        CHECK(c.weight_bytes > 130ull << 30);  // about 141 GB
        CHECK(c.tensor_parallel == 4);         // 2 x 70 GiB cannot hold 131 GiB + 10 GiB; 4 can
        CHECK(c.pipeline_parallel == 1);
        CHECK(c.nodes == 1);
        CHECK(c.gpus_per_node == 4);
    }
    SECTION("a 405B model in F16 spans nodes: a node's tensor parallelism, pipeline stages across nodes") {
        const ModelShape s = ModelShape::from_catalog("llama3-405b", DType::F16);
        const ClusterSizing c = size_cluster(s, h100s(8192, 16));
        CHECK(c.tensor_parallel == 8);
        CHECK(c.pipeline_parallel == 2);
        CHECK(c.nodes == 2);
        CHECK(c.gpus_per_node == 8);
        CHECK(c.reasons.size() >= 4);
    }
}

TEST_CASE("cluster sizing: a decode target asks for more tensor parallelism, up to a node", "[unit][planner]") {
    const ModelShape s = ModelShape::from_catalog("llama3-8b", DType::F16);
    const ClusterSizing one = size_cluster(s, h100s(2048, 1));
    const ClusterSizing fast = size_cluster(s, h100s(2048, 1, one.decode_tps * 1.5));
    CHECK(fast.tensor_parallel == 2);
    CHECK(fast.meets_target);
    CHECK(fast.decode_tps == Approx(one.decode_tps * 2).epsilon(0.05));  // bandwidth-bound: two GPUs read half each
    const ClusterSizing too_fast = size_cluster(s, h100s(2048, 1, one.decode_tps * 100));
    CHECK(too_fast.tensor_parallel == 8);
    CHECK_FALSE(too_fast.meets_target);
    // One GPU after another (llama.cpp's layer split) is no faster than one.
    ClusterRequest layers = h100s(2048, 1, one.decode_tps * 1.5);
    layers.layers_only = true;
    CHECK(size_cluster(s, layers).decode_tps == Approx(one.decode_tps));
}

TEST_CASE("cluster sizing: what no cluster holds is an error", "[unit][planner]") {
    const ModelShape s = ModelShape::from_catalog("llama3-8b", DType::F16);
    CHECK_THROWS_AS(size_cluster(s, h100s(1 << 20, 1 << 20)), UsageError);
    CHECK_THROWS_AS(size_cluster(s, h100s(0, 1)), UsageError);
}
