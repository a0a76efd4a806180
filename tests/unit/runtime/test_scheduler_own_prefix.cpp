// A batch at one depth filled by one prefill (Request::own_prefix, as `strata bench -d` fills
// it): each sequence decodes the tokens it decodes alone after a prefill of its own, and holds
// every KV block it reads alone.
#include <catch2/catch.hpp>

#include "runtime/engine.h"
#include "tests/support/depth_batch.h"
#include "tests/support/engine_options.h"
#include "tests/support/generate.h"
#include "tests/support/model_paths.h"

using namespace strata;
using namespace strata::runtime;

TEST_CASE("scheduler: a batch at one depth from one prefill decodes as each alone, every block its own", "[unit][scheduler]") {
    const std::filesystem::path path = test::tiny_llama_path();
    // Four whole blocks and a partial one: the partial block is computed by every sequence.
    std::vector<int32_t> depth(70);
    for (size_t i = 0; i < depth.size(); ++i) depth[i] = 1 + int32_t(i * 37 % 400);
    const std::vector<std::vector<int32_t>> tails{{11, 12}, {13}, {14, 15, 16}, {17}};
    const int n_gen = 12;
    std::vector<std::vector<int32_t>> want;
    for (const auto& tail : tails) {
        Engine alone(test::engine_options(path, 128));
        auto prompt = depth;
        prompt.insert(prompt.end(), tail.begin(), tail.end());
        want.push_back(test::generate(alone, prompt, test::greedy(n_gen, true)).tokens);
    }
    for (bool own : {true, false}) {
        INFO((own ? "copies of its own" : "attached by reference"));
        EngineOptions o = test::engine_options(path, 128);
        o.kv_positions = int(tails.size()) * 128;
        Engine engine(o);
        const test::DepthBatch got = test::after_one_fill(engine, depth, tails, n_gen, own);
        for (size_t i = 0; i < tails.size(); ++i) {
            INFO("sequence " << i);
            CHECK(got.results[i].tokens == want[i]);
            CHECK(got.results[i].cached_tokens == 64);  // the depth's whole blocks, not computed again
        }
        if (own) CHECK(got.max_holders == 1);
        else CHECK(got.max_holders > 1);  // what the copies avoid: sequences reading one block
        CHECK(engine.kv().pool().n_used() == 0);
    }
}
