// deepseek2's and gpt-oss's layers bound by models/arch_tensors' list: the file checked against
// the list first (a missing tensor named, not a llama tensor it never had), each tensor on its
// view, and an older deepseek2 conversion refused with the way out.
#include <catch2/catch.hpp>

#include <algorithm>

#include "core/error.h"
#include "models/gguf_file.h"
#include "models/hparams.h"
#include "runtime/weights/model_weights.h"
#include "tests/support/arch_files.h"

using namespace strata;
using namespace strata::runtime;

namespace {

ModelWeights bind_file(const std::filesystem::path& path) {
    static std::vector<models::GgufFile> files;  // the views point into the mapped files
    files.push_back(models::GgufFile::open(path));
    return ModelWeights::bind(files.back(), models::Hparams::from_gguf(files.back()));
}

}  // namespace

TEST_CASE("listed layers: gpt-oss's tensors bound to their views, a missing one named", "[unit][weights]") {
    const ModelWeights w = bind_file(test::write_arch_file(test::gpt_oss_keys, "bind_oss"));
    const LayerWeights& l = w.layers[1];
    CHECK(l.attn_sinks.n_cols == 4);
    CHECK(l.bo.n_cols == 32);
    CHECK(l.ffn_norm.n_cols == 32);  // post_attention_norm: the feed-forward's input norm
    CHECK(l.ffn_gate_inp_b.n_cols == 4);
    CHECK((l.ffn_down_exps_b.n_cols == 32 && l.ffn_down_exps_b.n_rows == 4));
    CHECK(l.ffn_gate_exps.n_mats == 4);
    CHECK_FALSE(l.attn_post_norm);

    const auto no_sinks = test::write_arch_file(test::gpt_oss_keys, "bind_oss_no_sinks", 0, [](auto& specs, auto& types) {
        const auto it = std::find_if(specs.begin(), specs.end(), [](const auto& s) { return s.name == "blk.1.attn_sinks.weight"; });
        types.erase(types.begin() + (it - specs.begin()));
        specs.erase(it);
    });
    CHECK_THROWS_WITH(bind_file(no_sinks), Catch::Contains("'blk.1.attn_sinks.weight' is missing"));
}

TEST_CASE("listed layers: deepseek2's latent attention bound per head; an older conversion refused", "[unit][weights]") {
    const ModelWeights w = bind_file(test::write_arch_file(test::deepseek2_keys, "bind_ds2"));
    CHECK_FALSE(w.layers[0].ffn_gate_exps);  // the dense first layer
    CHECK(w.layers[0].ffn_gate.n_rows == 64);
    const LayerWeights& l = w.layers[1];
    CHECK((l.wk_b.n_cols == 16 && l.wk_b.n_rows == 16 && l.wk_b.n_mats == 4));  // per head: latent x qk_nope
    CHECK((l.wv_b.n_cols == 16 && l.wv_b.n_rows == 8 && l.wv_b.n_mats == 4));   // per head: v x latent
    CHECK(l.wq_a.n_rows == 24);
    CHECK(l.wkv_a.n_rows == 16 + 8);
    CHECK(l.ffn_up_shexp);

    // Without the *_mla keys the file is an older conversion, whose attn_kv_b holds both expansions.
    const auto older = test::write_arch_file(
        [](test::GgufWriter& g) {
            g.kv_string("general.architecture", "deepseek2");
            for (const auto& [key, value] : {std::pair{"context_length", 4096}, {"embedding_length", 32}, {"block_count", 2},
                                            {"feed_forward_length", 64}, {"attention.head_count", 4},
                                            {"attention.head_count_kv", 1}, {"expert_count", 4}, {"expert_used_count", 2},
                                            {"expert_feed_forward_length", 16}, {"attention.kv_lora_rank", 16},
                                            {"attention.key_length", 24}, {"attention.value_length", 8},
                                            {"rope.dimension_count", 8}, {"leading_dense_block_count", 1}})
                g.kv_u32(std::string("deepseek2.") + key, uint32_t(value));
        },
        "bind_ds2_kv_b");
    try {
        bind_file(older);
        FAIL("an older deepseek2 conversion was bound");
    } catch (const FormatError& e) {
        CHECK_THAT(e.what(), Catch::Contains("attn_kv_b"));
        CHECK_THAT(e.hint(), Catch::Contains("convert the model again"));
    }
}
