#include <catch2/catch.hpp>

#include <cstring>

#include "models/gguf_file.h"
#include "runtime/weight_store.h"
#include "storage/budget.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/tiny_model.h"

using namespace strata;

namespace {
std::vector<const WeightRef*> refs(const LayerWeights& l) {
    return {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_norm, &l.ffn_gate, &l.ffn_up, &l.ffn_down};
}
}  // namespace

TEST_CASE("streamed layers arrive with the same bytes as the mapped file, pass after pass", "[unit][stream]") {
    auto path = test::temp_path("stream_model.gguf");
    test::write_tiny_model(test::tiny_config("llama", 256, 6, 1024), 7, 1e-5f, path);
    auto file = GgufFile::open(path);
    auto hp = Hparams::from_gguf(file);
    const auto reference = ModelWeights::bind(file, hp);

    // Layers of ~3.9 MiB: room for the head, a ring of 3 layer buffers and one more layer.
    storage::MemoryBudget budget("DRAM", 17 << 20, "--dram");
    WeightStore store(file, hp, budget, 0, 2);
    REQUIRE(store.residency().n_streamed() == 5);
    CHECK(budget.used() <= budget.limit());

    auto check_layer = [&](int il) {
        const LayerWeights& got = store.acquire(il);
        const auto want = refs(reference.layers[il]), have = refs(got);
        for (size_t i = 0; i < want.size(); ++i)
            CHECK(std::memcmp(want[i]->data, have[i]->data, want[i]->info->nbytes) == 0);
        store.release(il);
    };
    for (int pass = 0; pass < 3; ++pass)
        for (int il = 0; il < hp.n_layer; ++il) check_layer(il);
    CHECK(store.stats().layers_read == 3u * store.residency().n_streamed());

    // A pass that stopped part-way (an error mid-forward) is followed by a fresh one.
    check_layer(0);
    check_layer(1);
    for (int il = 0; il < hp.n_layer; ++il) check_layer(il);
}
