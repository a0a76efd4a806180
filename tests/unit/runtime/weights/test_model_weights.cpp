// How tensors bind: phi3's fused tensors as views of their rows, experts as one matrix each,
// byte counts that take a tensor once, the share of the experts a token reads, and early
// Mixtral files refused with the way out.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "models/gguf_file.h"
#include "runtime/weights/model_weights.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/tiny_engine.h"
#include "tests/support/tiny_model.h"

using namespace strata;
using namespace strata::runtime;

TEST_CASE("model weights: phi3's fused tensors are views of their rows, counted once", "[unit][weights]") {
    auto c = test::tiny_config("phi3", 64, 2, 96);
    c["fused"] = true;
    const test::TinyModelFile m("weights_phi3.gguf", c, 3);
    const ModelWeights w = ModelWeights::bind(m.file, m.hp);
    const LayerWeights& l = w.layers[1];
    const auto* qkv = m.file.find_tensor("blk.1.attn_qkv.weight");
    const auto* gate_up = m.file.find_tensor("blk.1.ffn_up.weight");
    REQUIRE((qkv && gate_up));
    const int64_t row = 64 * 4, Q = m.hp.n_embd_q(), KV = m.hp.n_embd_kv();
    CHECK((l.wq.info == qkv && l.wk.info == qkv && l.wv.info == qkv));
    CHECK((l.wq.offset == 0 && l.wk.offset == uint64_t(Q * row) && l.wv.offset == uint64_t((Q + KV) * row)));
    CHECK((l.wq.n_rows == Q && l.wk.n_rows == KV && l.wv.n_rows == KV));
    CHECK(static_cast<const std::byte*>(l.wv.data) - static_cast<const std::byte*>(l.wq.data) == (Q + KV) * row);
    CHECK((l.ffn_gate.offset == 0 && l.ffn_up.offset == uint64_t(96 * row) && l.ffn_up.info == gate_up));
    CHECK(file_offset(m.file, l.wk) == m.file.file_offset(*qkv) + Q * row);
    uint64_t file_bytes = 0;
    for (const auto& t : m.file.tensors()) file_bytes += t.nbytes;
    CHECK(w.total_bytes() == file_bytes);  // every tensor once, fused ones too
}

TEST_CASE("model weights: each expert is one matrix of its 3-D tensor; decode reads the experts a token uses", "[unit][weights]") {
    auto c = test::tiny_config("qwen3moe", 64, 2, 96);
    c["qk_norm"] = true, c["n_expert"] = 8, c["n_expert_used"] = 2, c["n_ff_exp"] = 32;
    const test::TinyModelFile m("weights_moe.gguf", c, 3);
    const ModelWeights w = ModelWeights::bind(m.file, m.hp);
    const WeightRef& up = w.layers[0].ffn_up_exps;
    CHECK((up.n_mats == 8 && up.n_rows == 32 && up.n_cols == 64));
    const WeightRef e5 = up.mat(5);
    CHECK((e5.n_mats == 1 && e5.offset == 5 * 32 * 64 * 4));
    CHECK(static_cast<const std::byte*>(e5.data) - static_cast<const std::byte*>(up.data) == 5 * 32 * 64 * 4);
    uint64_t experts = 0;
    for (const auto& t : m.file.tensors())
        if (t.n_dims == 3) experts += t.nbytes;
    // Tied output: the embedding table is the head, read whole; of the experts a token reads 2 of 8.
    CHECK(w.decode_bytes() == w.total_bytes() - experts * 6 / 8);
}

TEST_CASE("model weights: experts stored one tensor each (early Mixtral files) are refused with the way out", "[unit][weights]") {
    test::GgufWriter g;
    g.kv_string("general.architecture", "llama");
    g.kv_u32("llama.context_length", 64).kv_u32("llama.embedding_length", 32).kv_u32("llama.block_count", 1);
    g.kv_u32("llama.feed_forward_length", 32).kv_u32("llama.attention.head_count", 2);
    g.kv_u32("llama.expert_count", 4).kv_u32("llama.expert_used_count", 2);
    const std::vector<uint8_t> zeros(32 * 32 * 4, 0);
    g.tensor("token_embd.weight", 0, {32, 8}, std::vector<uint8_t>(32 * 8 * 4, 0));
    g.tensor("output_norm.weight", 0, {32}, std::vector<uint8_t>(32 * 4, 0));
    g.tensor("blk.0.ffn_gate.0.weight", 0, {32, 32}, zeros);
    const auto p = test::temp_path("old_mixtral.gguf");
    g.write(p);
    const auto f = models::GgufFile::open(p);
    const auto hp = models::Hparams::from_gguf(f);
    try {
        ModelWeights::bind(f, hp);
        FAIL("no error");
    } catch (const FormatError& e) {
        CHECK_THAT(e.what(), Catch::Contains("early Mixtral conversions"));
        CHECK_THAT(e.hint(), Catch::Contains("convert_hf_to_gguf.py"));
    }
}
