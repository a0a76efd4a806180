// The catalog shapes of DeepSeek-V2-Lite, DeepSeek-V3 and gpt-oss against their published
// parameter counts (total and active) and the sizes their GGUF files take; the KV cache of latent
// attention and of sliding windows; and a deepseek2 / gpt-oss header read as the catalog builds.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <string>

#include "core/error.h"
#include "planner/model_shape.h"
#include "tests/support/arch_files.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/tiny_model.h"

using namespace strata;
using namespace strata::planner;

namespace {

// Parameters a token multiplies: everything but the routed experts it does not choose.
double active_params(const ModelShape& s) {
    double n = static_cast<double>(s.output_matmul_params);  // the head (the embedding is a lookup)
    for (const auto& l : s.layers) n += static_cast<double>(l.n_params - l.n_expert_params) + double(l.n_expert_params) * s.n_expert_used / s.n_expert;
    return n;
}
bool near(double got, double want, double tol) { return std::fabs(got / want - 1) < tol; }

}  // namespace

TEST_CASE("catalog: DeepSeek and gpt-oss shapes have their published parameter counts", "[unit][planner]") {
    struct Published { const char* name; double total, active; };
    // Model cards: DeepSeek-V2-Lite 15.7B (2.4B active), DeepSeek-V3 671B without its MTP module
    // (37B active), gpt-oss-20b 20.9B (3.6B), gpt-oss-120b 116.8B (5.1B).
    for (const Published p : {Published{"deepseek-v2-lite", 15.7e9, 2.4e9}, {"deepseek-v3-671b", 671e9, 37e9},
                              {"gpt-oss-20b", 20.9e9, 3.6e9}, {"gpt-oss-120b", 116.8e9, 5.1e9}}) {
        INFO(p.name);
        const ModelShape s = ModelShape::from_catalog(p.name, DType::BF16);
        CHECK(near(static_cast<double>(s.n_params), p.total, 0.003));
        CHECK(near(active_params(s), p.active, 0.03));
        CHECK(s.n_expert > 0);
    }
}

TEST_CASE("catalog: the usual weight types: Q4_K_M's mix for DeepSeek-V3, MXFP4 experts for gpt-oss", "[unit][planner]") {
    // DeepSeek-V3 Q4_K_M: 404.43 GB as published (bartowski/DeepSeek-V3-GGUF, 9 parts).
    const ModelShape v3 = ModelShape::from_catalog("deepseek-v3-671b", std::string_view{});
    CHECK(v3.weight_type == DType::Q4_K);
    CHECK(near(static_cast<double>(v3.total_weight_bytes()), 404.43e9, 0.01));
    // gpt-oss-20b as ggml-org's GGUF: MXFP4 experts (17 bytes per 32), the rest Q8_0: 12.1 GB.
    const ModelShape oss = ModelShape::from_catalog("gpt-oss-20b", std::string_view{});
    CHECK(oss.weight_type == DType::MXFP4);
    CHECK(near(static_cast<double>(oss.total_weight_bytes()), 12.1e9, 0.01));
    for (const auto& l : oss.layers) CHECK(l.expert_bytes * 32 == uint64_t(l.n_expert_params) * 17);
    // Asking for a type changes the rest, never gpt-oss's experts; Q4_K_M leaves experts' down in Q6_K.
    const ModelShape oss_f16 = ModelShape::from_catalog("gpt-oss-20b", "F16");
    CHECK(oss_f16.layers[0].expert_bytes == oss.layers[0].expert_bytes);
    CHECK(oss_f16.total_weight_bytes() > oss.total_weight_bytes());
    // llama.cpp's Q4_K_M gives attn_v Q6_K on the layers it gives ffn_down Q6_K: the published
    // files' sizes as their model pages list them (Meta-Llama-3-8B-Instruct 4.92 GB, Mistral-7B-Instruct-v0.2 4.37 GB,
    // Qwen2.5-7B-Instruct 4.68 GB), and a decode launch more on those layers (q/k/v mix types).
    for (const auto& [name, published] : {std::pair{"llama3-8b", 4.92e9}, {"mistral-7b", 4.37e9}, {"qwen2.5-7b", 4.68e9}}) {
        INFO(name);
        const ModelShape m = ModelShape::from_catalog(name, "Q4_K_M");
        CHECK(near(static_cast<double>(m.total_weight_bytes()), published, 0.003));
        CHECK(m.layers.front().extra_decode_launches == 1);  // the first eighth: more bits
        CHECK(m.layers[size_t(m.n_layer / 8)].extra_decode_launches == 0);  // the first of the middle: not
    }
    const ModelShape lite = ModelShape::from_catalog("deepseek-v2-lite", std::string_view{});
    CHECK(lite.weight_type == DType::F16);
    CHECK_THROWS_AS(ModelShape::from_catalog("deepseek-v2-lite", "Q4_K_L"), UsageError);
}

TEST_CASE("catalog: Q4_K_M of an eight-expert model: K and V in Q8_0 and the attention output in Q5_K", "[unit][planner]") {
    // llama.cpp's mix for exactly 8 experts (Mixtral). Mixtral-8x22B-v0.1 Q4_K_M: 85.58 GB as published
    // (bartowski/Mixtral-8x22B-v0.1-GGUF, quantized by llama.cpp b2636).
    const ModelShape m = ModelShape::from_catalog("mixtral-8x22b", "Q4_K_M");
    CHECK(near(static_cast<double>(m.total_weight_bytes()), 85.58e9, 0.003));
    const ModelShape q4k = ModelShape::from_catalog("mixtral-8x22b", DType::Q4_K, DType::F16);
    // Per layer: K and V (6144 x 1024 each) 4 bits a weight more, the output (6144 x 6144) 1 more.
    const double kv = 2.0 * 6144 * 1024, out = 6144.0 * 6144;
    const LayerShape& mid = m.layers[size_t(m.n_layer / 8)];  // its down projections stay Q4_K
    CHECK(std::fabs(double(mid.weight_bytes) - double(q4k.layers[size_t(m.n_layer / 8)].weight_bytes) - (kv * 4 + out) / 8) < 64);
    for (const LayerShape& l : m.layers) CHECK(l.extra_decode_launches == 1);  // q in Q4_K beside K and V in Q8_0
    // A model of other expert counts keeps the general mix: OLMoE's 64 leave a middle layer in Q4_K.
    const ModelShape olmoe = ModelShape::from_catalog("olmoe-1b-7b", "Q4_K_M");
    const size_t il = size_t(olmoe.n_layer / 8);
    CHECK(olmoe.layers[il].weight_bytes == ModelShape::from_catalog("olmoe-1b-7b", DType::Q4_K, DType::F16).layers[il].weight_bytes);
}

TEST_CASE("catalog: latent attention caches one row per token, window layers attend to at most their window", "[unit][planner]") {
    const ModelShape v3 = ModelShape::from_catalog("deepseek-v3-671b", DType::Q4_K, DType::F16);
    CHECK(v3.kv_latent == 512 + 64);
    CHECK(v3.n_head_kv == 1);
    CHECK(v3.kv_bytes_per_token() == 576 * 2);  // not 128 heads x (192 + 128) values
    CHECK(v3.attended_positions(4096) == 4096);
    const ModelShape oss = ModelShape::from_catalog("gpt-oss-120b", DType::Q8_0, DType::F16);
    CHECK(oss.kv_bytes_per_token() == 2 * 8 * 64 * 2);
    CHECK(oss.n_layer_swa == 18);
    CHECK(oss.attended_positions(8192) == (18 * 8192.0 + 18 * 128.0) / 36);
    CHECK(oss.attended_positions(100) == 100);
    // Attention's matrices counted apart from the experts (MLA's k_b and v_b are 3-D, not experts).
    CHECK(v3.layers[5].n_attn_params == 7168LL * 1536 + 1536LL * 128 * 192 + 7168LL * 576 + 2 * 128LL * 128 * 512 + 128LL * 128 * 7168);
}

TEST_CASE("a deepseek2 and a gpt-oss header give the catalog's layout: experts, attention, KV", "[unit][planner]") {
    // Each architecture's tensor list (models/arch_tensors) at small sizes, F16 matrices.
    const ModelShape ds = ModelShape::from_gguf(test::write_arch_file(test::deepseek2_keys, "shape_ds2", 1));
    CHECK(ds.kv_latent == 24);
    CHECK(ds.head_dim == 24);
    CHECK(ds.kv_bytes_per_token(DType::F16) == 48);
    CHECK(ds.layers[0].expert_bytes == 0);                     // the dense lead layer: k_b, v_b are no experts
    CHECK(ds.layers[1].expert_bytes == 3 * 32 * 16 * 4 * 2);  // gate, up, down of 4 experts, F16
    // q_a, q_b, kv_a_mqa, k_b, v_b, output
    CHECK(ds.layers[0].n_attn_params == 32 * 24 + 24 * 4 * 24 + 32 * 24 + 16 * 16 * 4 + 16 * 8 * 4 + 4 * 8 * 32);
    const ModelShape oss = ModelShape::from_gguf(test::write_arch_file(test::gpt_oss_keys, "shape_oss", 1));
    CHECK(oss.n_layer_swa == 1);  // layer 0 of 2
    CHECK(oss.n_swa == 16);
    CHECK(oss.attended_positions(1000) == (1000.0 + 16.0) / 2);
    CHECK(oss.layers[0].expert_bytes == 3 * 32 * 16 * 4 * 2);  // the experts' biases are not their matrices
}

TEST_CASE("catalog: a layer's device ops are counted as its architecture's files give them", "[unit][planner]") {
    // Each catalog family against a file of its architecture (models/arch_tensors' lists, a tiny
    // qwen2 with its q/k/v biases, a tiny mixture of llama experts): a layer's extra ops, its held
    // experts' ops and its extra launches, dense and expert layers alike.
    auto same_ops = [](const LayerShape& catalog, const LayerShape& file) {
        CHECK(catalog.extra_device_ops == file.extra_device_ops);
        CHECK(catalog.device_expert_ops == file.device_expert_ops);
        CHECK(catalog.extra_decode_launches == file.extra_decode_launches);
    };
    auto tiny = [](nlohmann::json config, const std::string& name) {
        const auto path = test::temp_path(name + ".gguf");
        test::write_tiny_model(config, 1, 1e-5f, path);
        return ModelShape::from_gguf(path);
    };
    const ModelShape ds = ModelShape::from_gguf(test::write_arch_file(test::deepseek2_keys, "ops_ds2", 1));
    const ModelShape v3 = ModelShape::from_catalog("deepseek-v3-671b", "F16");  // low-rank queries, as the file
    same_ops(v3.layers.front(), ds.layers.front());  // a dense lead layer
    same_ops(v3.layers.back(), ds.layers.back());
    CHECK(v3.layers.back().device_expert_ops == 3);
    const ModelShape oss = ModelShape::from_gguf(test::write_arch_file(test::gpt_oss_keys, "ops_oss", 1));
    const ModelShape oss20 = ModelShape::from_catalog("gpt-oss-20b", "F16");
    same_ops(oss20.layers.front(), oss.layers.front());
    CHECK(oss20.layers.front().device_expert_ops == 6);  // three products and three biases
    auto qwen2 = test::tiny_config("qwen2", 64, 2, 96);
    qwen2["qkv_bias"] = true;
    same_ops(ModelShape::from_catalog("qwen2.5-7b", "F16").layers.front(), tiny(qwen2, "ops_qwen2").layers.front());
    auto mixtral = test::tiny_config("llama", 64, 2, 96);
    mixtral["n_expert"] = 4, mixtral["n_expert_used"] = 2;
    same_ops(ModelShape::from_catalog("mixtral-8x7b", "F16").layers.front(), tiny(mixtral, "ops_mixtral").layers.front());
    same_ops(ModelShape::from_catalog("llama3-8b", "F16").layers.front(), tiny(test::tiny_config("llama", 64, 2, 96), "ops_llama").layers.front());
    // Shapes Strata does not run count none.
    CHECK(ModelShape::from_catalog("opt-6.7b", "F16").device_other_ops() == 2);
}

TEST_CASE("model shape: the first n layers keep the rest and drop the others' weights", "[unit][planner]") {
    const ModelShape full = ModelShape::from_catalog("gpt-oss-20b", DType::Q8_0);
    const int32_t n = full.n_layer / 2;
    const ModelShape cut = full.first_layers(n);
    REQUIRE(cut.n_layer == n);
    REQUIRE(cut.layers.size() == size_t(n));
    int64_t dropped = 0;
    for (int32_t il = n; il < full.n_layer; ++il) dropped += full.layers[size_t(il)].n_params;
    CHECK(cut.n_params == full.n_params - dropped);
    CHECK(cut.output_bytes == full.output_bytes);
    CHECK(cut.n_layer_swa <= n);
    CHECK(full.first_layers(full.n_layer).layers == full.layers);
}
