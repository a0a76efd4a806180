// --override-tensor REGEX=TIER: parsed as llama.cpp writes it, resolved against a model's
// tensor names (first matching pattern wins), and what this runtime cannot place refused.
#include <catch2/catch.hpp>

#include "runtime/place/tensor_overrides.h"
#include "tests/support/tiny_engine.h"
#include "tests/support/tiny_model.h"

using namespace strata;
using namespace strata::runtime;
using planner::Tier;

namespace {
nlohmann::json moe() {
    auto c = test::tiny_config("qwen3moe", 64, 2, 96);
    c["n_expert"] = 4;
    c["n_expert_used"] = 2;
    c["n_ff_exp"] = 32;
    c["qk_norm"] = true;
    return c;
}
}  // namespace

TEST_CASE("tensor overrides: parsing", "[unit][overrides]") {
    const TensorOverride o = parse_tensor_override("blk\\.[0-9]+\\.ffn_.*_exps=nvme");
    CHECK(o.pattern == "blk\\.[0-9]+\\.ffn_.*_exps");
    CHECK(o.tier == Tier::Nvme);
    CHECK(parse_tensor_override("exps=CPU").tier == Tier::Dram);  // llama.cpp's buffer name
    CHECK(parse_tensor_override("attn=device").tier == Tier::Gpu);
    CHECK_THROWS_WITH(parse_tensor_override("exps"), Catch::Contains("is not REGEX=TIER"));
    CHECK_THROWS_WITH(parse_tensor_override("exps=ssd"), Catch::Contains("unknown tier 'ssd'"));
    CHECK_THROWS_WITH(parse_tensor_override("blk[=dram"), Catch::Contains("is not a regular expression"));
}

TEST_CASE("tensor overrides: resolved against the model's tensor names", "[unit][overrides]") {
    test::TinyModelFile m("overrides_moe.gguf", moe(), 3);
    // The first pattern that matches decides: layer 1's experts in DRAM, the others on NVMe.
    const OverrideRequest r = resolve_overrides({parse_tensor_override("blk\\.1\\..*exps=dram"),
                                                 parse_tensor_override("exps=nvme"),
                                                 parse_tensor_override("attn_q\\.=dram")},
                                                m.file);
    REQUIRE(r.experts.size() == 2);
    CHECK(r.experts[0] == Tier::Nvme);
    CHECK(r.experts[1] == Tier::Dram);
    CHECK(r.resident[0] == std::vector<std::string>{"blk.0.attn_q.weight"});
    CHECK(r.resident[1].size() == 4);  // its attn_q and its three expert tensors must stay resident
    CHECK_NOTHROW(check_resident_overrides(r, {false, false}, 0));
    CHECK_THROWS_WITH(check_resident_overrides(r, {true, false}, 1 << 20), Catch::Contains("keeps 'blk.0.attn_q.weight' in DRAM"));

    CHECK_THROWS_WITH(resolve_overrides({parse_tensor_override("attn_q=nvme")}, m.file),
                      Catch::Contains("not a routed expert tensor"));
    // Routed experts go to the device by name; no other tensor does.
    const OverrideRequest dev = resolve_overrides({parse_tensor_override("blk\\.1\\.ffn_.*_exps=device")}, m.file);
    CHECK_FALSE(dev.experts[0]);
    CHECK(dev.experts[1] == Tier::Gpu);
    CHECK(asks_device(dev));
    CHECK_FALSE(asks_device(r));
    CHECK_THROWS_WITH(resolve_overrides({parse_tensor_override("attn_q=device")}, m.file),
                      Catch::Contains("only routed experts are placed on the device by name"));
    CHECK_THROWS_WITH(resolve_overrides({parse_tensor_override("blk\\.0\\.ffn_up_exps=dram"), parse_tensor_override("exps=nvme")},
                                        m.file),
                      Catch::Contains("layer 0's expert tensors are given different tiers"));
}

TEST_CASE("tensor overrides: messages name the flag as typed; a dense model is told it has no experts", "[unit][overrides]") {
    test::TinyModelFile dense("overrides_dense.gguf", test::tiny_config("llama", 64, 2, 96), 3);
    // "gpu" is llama.cpp's name for the device: the message keeps the user's word.
    CHECK_THROWS_WITH(resolve_overrides({parse_tensor_override("blk\\.1\\.=gpu")}, dense.file),
                      Catch::Contains("--override-tensor blk\\.1\\.=gpu: matches 'blk.1.") &&
                          Catch::Contains("this model has no routed experts"));
    CHECK_THROWS_WITH(resolve_overrides({parse_tensor_override("attn_q=nvme")}, dense.file),
                      Catch::Contains("no routed experts, the only tensors placed on the NVMe by name"));
    // Keeping a dense model's tensors in DRAM is allowed; a pattern matching nothing is listed
    // once, as typed, for the one warning the engine gives.
    const OverrideRequest r = resolve_overrides({parse_tensor_override("attn_q=CPU"), parse_tensor_override("nothing=dram")},
                                                dense.file);
    CHECK(r.resident[0] == std::vector<std::string>{"blk.0.attn_q.weight"});
    CHECK(r.unmatched == std::vector<std::string>{"nothing=dram"});
}
