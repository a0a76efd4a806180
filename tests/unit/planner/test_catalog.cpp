#include <catch2/catch.hpp>

#include <cmath>

#include "core/error.h"
#include "models/gguf_file.h"
#include "planner/catalog.h"
#include "planner/hardware_profile.h"
#include "planner/model_shape.h"
#include "tests/support/dry_run_specs.h"
#include "tests/support/model_paths.h"

using namespace strata;
using namespace strata::models;
using namespace strata::planner;

using test::gpu_spec;
using test::system_spec;

TEST_CASE("the built-in catalog parses and names the required parts with sources", "[unit][planner]") {
    const Catalog& c = Catalog::builtin();
    for (const char* g : {"rtx3090", "rtx4090", "rtx5090", "l40s", "a100-40g", "a100-80g", "h100-80g", "h200", "t4"}) {
        INFO(g);
        const GpuEntry* e = c.find_gpu(g);
        REQUIRE(e);
        CHECK(e->memory_bytes >= 16ull << 30);
        CHECK(e->mem_gbps > 0);
        CHECK(e->fp16_tflops > 0);
        CHECK(e->source.find("http") != std::string::npos);
        CHECK(c.find_pcie(e->pcie));
    }
    for (const char* n : {"gen3", "gen4", "gen5"}) {
        REQUIRE(c.find_pcie(n));
        REQUIRE(c.find_nvme(n));
        CHECK_FALSE(c.find_nvme(n)->source.empty());
    }
    CHECK(c.find_pcie("gen4")->x16_gbps == Approx(2 * c.find_pcie("gen3")->x16_gbps));
    for (const char* d : {"ddr4-3200", "ddr5-4800", "ddr5-5600"}) REQUIRE(c.find_dram(d));
    for (const auto& cpu : c.cpus) CHECK(c.find_dram(cpu.dram));
    CHECK(c.find_gpu("RTX 4090") == c.find_gpu("rtx4090"));
    CHECK(c.match_gpu_device("NVIDIA GeForce RTX 4090") == c.find_gpu("rtx4090"));
    CHECK(c.match_gpu_device("NVIDIA H100 80GB HBM3") == c.find_gpu("h100-80g"));
    CHECK(c.match_gpu_device("NVIDIA H200") == c.find_gpu("h200"));  // as the card names itself
    CHECK(c.find_gpu("no-such-gpu") == nullptr);
}

TEST_CASE("every catalog GPU and system makes a valid profile", "[unit][planner]") {
    const Catalog& c = Catalog::builtin();
    for (const auto& g : c.gpus) {
        DryRunSpec spec;
        spec.gpu = g.name;
        const HardwareProfile p = profile_from_catalog(spec);
        CHECK(p.has_gpu());
        CHECK(p.gpu->h2d_gbps < g.mem_gbps);
    }
    for (const auto& s : c.systems) CHECK_NOTHROW(profile_from_catalog(system_spec(s.name)));
    DryRunSpec none;
    none.gpu = "none";
    CHECK_FALSE(profile_from_catalog(none).has_gpu());
    DryRunSpec bad;
    bad.gpu = "voodoo5";
    CHECK_THROWS_AS(profile_from_catalog(bad), UsageError);
}

TEST_CASE("a system's measured figures stay with its own parts: a GPU or disk named in their place is its own", "[unit][planner]") {
    DryRunSpec own = system_spec("flexgen-t4");
    const HardwareProfile t4 = profile_from_catalog(own);
    DryRunSpec swapped = own;
    swapped.gpu = "rtx4090";
    swapped.nvme = "gen5";
    const HardwareProfile p = profile_from_catalog(swapped);
    DryRunSpec alone;
    alone.gpu = "rtx4090";
    alone.nvme = "gen5";
    const HardwareProfile catalog = profile_from_catalog(alone);
    REQUIRE(p.has_gpu());
    // The 4090's memory and link, not the T4 machine's 16 GiB and gen3 figures.
    CHECK(p.gpu->memory_bytes == catalog.gpu->memory_bytes);
    CHECK(p.gpu->memory_bytes != t4.gpu->memory_bytes);
    CHECK(p.gpu->h2d_gbps == catalog.gpu->h2d_gbps);
    CHECK(p.nvme.read_gbps == catalog.nvme.read_gbps);
    CHECK(p.dram.read_gbps == t4.dram.read_gbps);  // the system's own CPU and DRAM keep its measurements
}

TEST_CASE("parts named beside a machine's own profile replace only themselves", "[unit][planner]") {
    // A profile standing for this machine's probe: the T4 machine's measured figures.
    const HardwareProfile base = profile_from_catalog(system_spec("flexgen-t4"));
    DryRunSpec gpu;
    gpu.gpu = "rtx4090";
    const HardwareProfile with_gpu = with_catalog_parts(base, gpu);
    REQUIRE(with_gpu.has_gpu());
    CHECK(with_gpu.gpu->memory_bytes == profile_from_catalog(gpu).gpu->memory_bytes);  // the 4090's own
    CHECK(with_gpu.cpu.n_cores == base.cpu.n_cores);                                   // the rest the machine's
    CHECK(with_gpu.dram.read_gbps == base.dram.read_gbps);
    CHECK(with_gpu.dram.capacity_bytes == base.dram.capacity_bytes);
    CHECK(with_gpu.nvme.read_gbps == base.nvme.read_gbps);
    DryRunSpec link;
    link.pcie = "gen5";
    const HardwareProfile faster_link = with_catalog_parts(base, link);
    CHECK(faster_link.gpu->memory_bytes == base.gpu->memory_bytes);
    CHECK(faster_link.gpu->h2d_gbps > base.gpu->h2d_gbps);
    DryRunSpec cpu;
    cpu.cpu = "epyc-9654";
    const HardwareProfile with_cpu = with_catalog_parts(base, cpu);
    CHECK(with_cpu.cpu.n_cores == profile_from_catalog(cpu).cpu.n_cores);
    CHECK(with_cpu.dram.read_gbps == profile_from_catalog(cpu).dram.read_gbps);
    CHECK(with_cpu.dram.capacity_bytes == base.dram.capacity_bytes);  // the memory installed stays
    CHECK(*with_cpu.gpu == *base.gpu);
    DryRunSpec none;
    none.gpu = "none";
    CHECK_FALSE(with_catalog_parts(base, none).has_gpu());
    // A DRAM kind fills a CPU's channels; a link is a GPU's; a whole machine is not a part.
    DryRunSpec kind;
    kind.dram_kind = "ddr5-4800";
    CHECK_THROWS_WITH(with_catalog_parts(base, kind), Catch::Contains("needs the CPU"));
    CHECK_THROWS_WITH(with_catalog_parts(with_catalog_parts(base, none), link), Catch::Contains("has no GPU"));
    CHECK_THROWS_AS(with_catalog_parts(base, system_spec("flexgen-t4")), UsageError);
}

TEST_CASE("catalog model shapes: every name builds, llama3-8b has 8.03 B parameters", "[unit][planner]") {
    for (const auto& m : Catalog::builtin().models) {
        INFO(m.name);
        const ModelShape s = ModelShape::from_catalog(m.name, DType::F16);
        CHECK(s.n_layer == static_cast<int32_t>(s.layers.size()));
        CHECK(s.total_weight_bytes() > 0);
    }
    for (const char* n : {"llama3-8b", "llama3-70b", "llama3-405b", "qwen2.5-7b", "qwen2.5-72b", "mistral-7b", "opt-30b", "opt-175b"})
        CHECK_NOTHROW(ModelShape::from_catalog(n, DType::F16));

    const ModelShape s = ModelShape::from_catalog("llama3-8b", DType::Q4_0);
    CHECK(std::fabs(s.n_params / 8.03e9 - 1) < 0.002);
    // Q4_0 is 18 bytes per 32 weights; norms stay F32.
    CHECK(std::fabs(s.total_weight_bytes() / (8.03e9 * 18 / 32) - 1) < 0.01);
    CHECK(s.kv_bytes_per_token() * s.n_layer == 131072.0);  // 128 KiB per token in F16
    CHECK(std::fabs(ModelShape::from_catalog("llama3-70b", DType::F16).n_params / 70.55e9 - 1) < 0.01);
    CHECK(std::fabs(ModelShape::from_catalog("opt-175b", DType::F16).n_params / 175e9 - 1) < 0.01);
    CHECK_THROWS_AS(ModelShape::from_catalog("gpt-9", DType::F16), UsageError);
}

// Mistral's and AI2's announced sizes: Mixtral 8x7B has 46.7 B parameters and uses 12.9 B per
// token; OLMoE-1B-7B 6.9 B and 1.3 B.
TEST_CASE("catalog mixtures of experts: their parameters, all and active, as announced", "[unit][planner]") {
    const auto active = [](const ModelShape& s) {
        double n = static_cast<double>(s.n_params);
        for (const auto& l : s.layers) n -= static_cast<double>(l.n_expert_params) * (1.0 - double(s.n_expert_used) / s.n_expert);
        return n;
    };
    const ModelShape mixtral = ModelShape::from_catalog("mixtral-8x7b", DType::F16);
    CHECK(mixtral.n_expert == 8);
    CHECK(mixtral.n_expert_used == 2);
    CHECK(std::fabs(mixtral.n_params / 46.7e9 - 1) < 0.01);
    CHECK(std::fabs(active(mixtral) / 12.9e9 - 1) < 0.01);
    const ModelShape olmoe = ModelShape::from_catalog("olmoe-1b-7b", DType::F16);
    CHECK(olmoe.n_expert == 64);
    CHECK(std::fabs(olmoe.n_params / 6.9e9 - 1) < 0.02);
    CHECK(std::fabs(active(olmoe) / 1.3e9 - 1) < 0.03);
    // The experts are each layer's 3-D tensors: all but the attention, norms and router.
    for (const auto& l : mixtral.layers) CHECK(l.expert_bytes > l.weight_bytes * 9 / 10);
}

TEST_CASE("the SmolLM2 header gives a shape whose bytes are its tensors' bytes", "[unit][planner]") {
    const auto path = strata::test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "SmolLM2 model");
    const ModelShape s = ModelShape::from_gguf(*path);
    const GgufFile f = GgufFile::open(*path, /*map_data=*/false);
    uint64_t total = 0;
    int64_t params = 0;
    for (const auto& t : f.tensors()) total += t.nbytes, params += t.nelements();
    CHECK(s.total_weight_bytes() == total);
    CHECK(s.n_params == params);
    CHECK(s.n_layer == 30);
    CHECK(s.tied_output);  // SmolLM2 ties its output to the embedding
    CHECK(s.embd_bytes == 0);
    for (const auto& l : s.layers) CHECK(l.weight_bytes == s.layers[0].weight_bytes);
}

TEST_CASE("hardware profiles round-trip through JSON", "[unit][planner]") {
    DryRunSpec spec;
    spec.gpu = "rtx4090";
    spec.dram = 64ull << 30;
    HardwareProfile p = profile_from_catalog(spec);
    p.cpu.rates = {{DType::Q4_0, 12.5, 310.25, 40.5, 2.25, 3.5, 290.5, 6.25, 10.25, 11.5, 9.75, 10.5, 8.25, 4.5},
                   {DType::F16, 9.75, 120.125}};
    p.cpu.rates[0].untile_gbps = 7.25;
    p.cpu.l3_bytes = 32u << 20;
    p.cpu.cache_bytes = 16u << 20;
    p.cpu.cache_curve = {{4u << 20, 30.5}, {64u << 20, 20.25}, {256u << 20, 15.0}};
    CHECK(HardwareProfile::from_json(p.to_json()) == p);
    // The probe's measured costs beyond matmuls.
    p.cpu.attention_tile = AttentionTileCost{{{DType::F16, 0.125}, {DType::Q8_0, 0.25}}, 0.0625, 0.5, 7.5, 600};
    p.cpu.vector = {0.375, 4000};
    p.cpu.loop_us = 0.25;
    CHECK(HardwareProfile::from_json(p.to_json()) == p);
    // A device's own ops as the probe measures them, the simulated device's and a GPU's.
    DeviceOps ops;
    ops.n_threads = 1;
    ops.rates = {{DType::Q4_0, 12.5, 310.25, 40.5, 2.25, 3.5, 0, 50.5, 0, 7.25, 0, 30.5, 6.5, 4.25, 20.75, 3.25}};
    ops.attention = {{512, 20.5}, {4096, 90.25}};
    ops.op_overhead_us = 3.5, ops.graph_op_us = 0.75, ops.h2d_gbps = 12.25, ops.d2h_gbps = 11.5, ops.handoff_us = 9;
    ops.round_trip_us = 42.5;
    p.sim = ops;
    p.gpu->ops = ops;
    CHECK(HardwareProfile::from_json(p.to_json()) == p);
    // A profile from before the round trip was measured loads without it (the probe measures
    // again), and a hop is then priced at the back-to-back figure.
    std::string before = p.to_json();
    for (size_t at; (at = before.find("\"round_trip_us\"")) != std::string::npos;) before.replace(at, 15, "\"a_later_field\"");
    const HardwareProfile old = HardwareProfile::from_json(before);
    REQUIRE(old.sim.has_value());
    CHECK(old.sim->round_trip_us == 0);
    CHECK(old.sim->hop_us() == 9);
    CHECK(p.sim->hop_us() == 42.5);

    // The disk's rate by reads in flight; a profile from before it loads without, its deep rate at any depth.
    p.nvme.read_depth_curve = {{1u << 20, 0.75}, {8u << 20, 1.5}, {32u << 20, 2.25}};
    CHECK(HardwareProfile::from_json(p.to_json()) == p);
    CHECK(p.nvme.read_gbps_at(2u << 20) == Approx(1.0));
    // The fewest bytes in flight reaching a share of the best rate: 2.25 at 32 MiB, 1.5 at 8 MiB.
    CHECK(p.nvme.saturating_inflight_bytes(0.95) == 32u << 20);
    CHECK(p.nvme.saturating_inflight_bytes(0.6) == 8u << 20);
    CHECK(p.nvme.saturating_inflight_bytes(0.1) == 1u << 20);
    // A point below one with fewer bytes in flight (a noisy measurement) is read at that one's rate.
    DiskProfile dip = p.nvme;
    dip.read_depth_curve = {{1u << 20, 3.19}, {4u << 20, 3.87}, {8u << 20, 1.73}, {32u << 20, 4.09}};
    CHECK(dip.read_gbps_at(8u << 20) == Approx(3.87));
    CHECK(dip.read_gbps_at(6u << 20) == Approx(3.87));
    CHECK(dip.read_gbps_at(16u << 20) == Approx(3.87 + 0.5 * (4.09 - 3.87)));
    CHECK(dip.saturating_inflight_bytes(0.9) == 4u << 20);
    std::string no_curve = p.to_json();
    no_curve.replace(no_curve.find("\"read_depth_curve\""), 18, "\"a_later_field___\"");
    const HardwareProfile before_curve = HardwareProfile::from_json(no_curve);
    CHECK(before_curve.nvme.read_depth_curve.empty());
    CHECK(before_curve.nvme.read_gbps_at(1u << 20) == p.nvme.read_gbps);
    CHECK(before_curve.nvme.saturating_inflight_bytes(0.95) == 0);
    std::swap(p.nvme.read_depth_curve[0], p.nvme.read_depth_curve[1]);
    CHECK_THROWS_WITH(HardwareProfile::from_json(p.to_json()), Catch::Contains("not ascending"));
    p.nvme.read_depth_curve.clear();

    HardwareProfile cpu_only = profile_from_catalog(gpu_spec("none"));
    const HardwareProfile back = HardwareProfile::from_json(cpu_only.to_json());
    CHECK(back == cpu_only);
    CHECK_FALSE(back.gpu.has_value());

    CHECK_THROWS_AS(HardwareProfile::from_json("{"), UsageError);
    CHECK_THROWS_AS(HardwareProfile::from_json(R"({"name": "x"})"), UsageError);
    std::string j = p.to_json();
    j.replace(j.find("\"read_gbps\""), 11, "\"read_gbpz\"");
    CHECK_THROWS_WITH(HardwareProfile::from_json(j), Catch::Contains("read_gbps"));
}
