// Self-speculation's parts: the exits it chooses among, the value it weighs them by, an engine
// that exits early computing what an engine of only those layers computes, and the exit
// following what the target keeps.
#include <catch2/catch.hpp>

#include <algorithm>

#include "core/error.h"
#include "runtime/spec/self_drafter.h"
#include "tests/support/engine_options.h"
#include "tests/support/generate.h"
#include "tests/support/model_paths.h"

using namespace strata;
using namespace strata::runtime;

TEST_CASE("self drafter: exits from a quarter to half of the layers, distinct", "[unit][spec]") {
    CHECK(exit_candidates(30) == std::vector<int32_t>{7, 11, 15});
    CHECK(exit_candidates(32) == std::vector<int32_t>{8, 12, 16});
    CHECK(exit_candidates(5) == std::vector<int32_t>{1, 2});
    CHECK(exit_candidates(1) == std::vector<int32_t>{1});
}

TEST_CASE("self drafter: an exit's value is the best chain's tokens per layer run", "[unit][spec]") {
    // Nothing kept: one token for the model's layers and a draft's.
    CHECK(exit_value(0.0, 4, 8, 16) == Approx(1.0 / 12));
    // a = 0.5, 2 of 8 layers: one draft 1.5 / 10, two 1.75 / 12, three 1.875 / 14.
    CHECK(exit_value(0.5, 2, 8, 16) == Approx(0.15));
    // Always kept: the deepest chain, 17 tokens for 8 + 16 * 2 layers.
    CHECK(exit_value(1.0, 2, 8, 16) == Approx(17.0 / 40));
    CHECK(exit_value(1.0, 2, 8, 4) == Approx(5.0 / 16));
    // The same acceptance is worth more from fewer layers.
    CHECK(exit_value(0.7, 2, 8, 16) > exit_value(0.7, 4, 8, 16));
}

TEST_CASE("self drafter: an early exit computes what a model of only those layers computes", "[unit][spec]") {
    Engine target(test::engine_options(test::tiny_llama_path(), 128));
    const auto early = open_early_layers(target);
    REQUIRE(early->hparams().n_layer == exit_candidates(target.hparams().n_layer).back());
    const std::vector<int32_t> tokens = target.tokenizer().encode("Once upon a time there was", true, false);
    const size_t V = size_t(target.hparams().n_vocab), last = (tokens.size() - 1) * V;
    for (int layers = 1; layers <= early->hparams().n_layer; ++layers) {
        INFO(layers << " layers");
        EngineOptions o = test::engine_options(test::tiny_llama_path(), 128);
        o.n_layers = layers;
        Engine alone(o);
        early->exit_after(layers);
        const auto want = test::prompt_logits(alone, tokens);
        const auto got = test::prompt_logits(*early, tokens);
        CHECK(std::equal(got.begin() + long(last), got.end(), want.begin() + long(last)));
    }
    // The whole model's logits are not a draft's.
    early->exit_after(0);
    const auto full = test::prompt_logits(target, tokens), cut = test::prompt_logits(*early, tokens);
    CHECK_FALSE(std::equal(cut.begin() + long(last), cut.end(), full.begin() + long(last)));
    CHECK_THROWS_AS(early->exit_after(early->hparams().n_layer + 1), UsageError);
    EngineOptions too_many = test::engine_options(test::tiny_llama_path(), 128);
    too_many.n_layers = target.hparams().n_layer + 1;
    CHECK_THROWS_AS(Engine(too_many), UsageError);
}

TEST_CASE("self drafter: a device backend refuses an early exit", "[unit][spec]") {
    EngineOptions o = test::engine_options(test::tiny_llama_path(), 128);
    o.gpu.device = DeviceKind::Sim;
    o.gpu.gpu_mem = uint64_t{256} << 20;
    Engine sim(o);
    CHECK_THROWS_WITH(sim.exit_after(1), Catch::Contains("every layer"));
}

TEST_CASE("self drafter: the exit goes deeper while shallow drafts miss, back once they are kept", "[unit][spec]") {
    auto smollm2 = test::default_model_path();
    STRATA_REQUIRE_MODEL(smollm2, "SmolLM2 model");
    Engine target(test::engine_options(*smollm2, 256));
    const auto early = open_early_layers(target);
    const auto exits = exit_candidates(target.hparams().n_layer);
    SelfDrafter d(*early, target.hparams().n_layer, 8);
    CHECK(d.exit_layers() == exits.front());  // alike priors: the cheapest first
    const std::vector<int32_t> context = target.tokenizer().encode("The capital of France is", true, false);
    std::vector<int32_t> out;
    // Only the deepest exit's drafts are kept: it is the one run, but for a try of the others now and then.
    int deepest = 0;
    for (int i = 0; i < 60; ++i) {
        d.draft(context, 4, out);
        REQUIRE(out.size() == 4);
        if (i >= 30) deepest += d.exit_layers() == exits.back();
        d.accepted(d.exit_layers() == exits.back() ? 4 : 0);
    }
    CHECK(deepest >= 25);
    // Every exit's drafts kept: the cheapest wins once it is tried again.
    for (int i = 0; i < 80; ++i) {
        d.draft(context, 4, out);
        d.accepted(static_cast<int32_t>(out.size()));
    }
    CHECK(d.exit_layers() == exits.front());
}
