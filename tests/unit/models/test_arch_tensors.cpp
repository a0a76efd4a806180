// The tensor lists of deepseek2 and gpt-oss against files written from them and broken on
// purpose: a complete file passes, a missing, misshapen or mistyped tensor is named.
#include <catch2/catch.hpp>

#include <functional>
#include <string>

#include "core/error.h"
#include "models/arch_tensors.h"
#include "models/gguf_file.h"
#include "tests/support/gguf_writer.h"

using namespace strata;
using namespace strata::models;
using strata::test::GgufWriter;

namespace {

constexpr uint32_t kF32 = 0, kF16 = 1;

void common_keys(GgufWriter& w, const std::string& arch, uint32_t n_layer) {
    w.kv_string("general.architecture", arch);
    w.kv_u32(arch + ".context_length", 4096).kv_u32(arch + ".embedding_length", 32).kv_u32(arch + ".block_count", n_layer);
    w.kv_u32(arch + ".feed_forward_length", 64).kv_u32(arch + ".attention.head_count", 4);
    w.kv_u32(arch + ".expert_count", 4).kv_u32(arch + ".expert_used_count", 2);
    w.kv_u32(arch + ".expert_feed_forward_length", 16);
}
void deepseek2_keys(GgufWriter& w) {
    common_keys(w, "deepseek2", 2);
    w.kv_u32("deepseek2.attention.head_count_kv", 1).kv_u32("deepseek2.attention.kv_lora_rank", 16);
    w.kv_u32("deepseek2.attention.q_lora_rank", 24);
    w.kv_u32("deepseek2.attention.key_length", 24).kv_u32("deepseek2.attention.value_length", 16);
    w.kv_u32("deepseek2.attention.key_length_mla", 24).kv_u32("deepseek2.attention.value_length_mla", 8);
    w.kv_u32("deepseek2.rope.dimension_count", 8).kv_u32("deepseek2.leading_dense_block_count", 1);
    w.kv_u32("deepseek2.expert_shared_count", 1);
}
void gpt_oss_keys(GgufWriter& w) {
    common_keys(w, "gpt-oss", 2);
    w.kv_u32("gpt-oss.attention.head_count_kv", 2).kv_u32("gpt-oss.attention.key_length", 8);
    w.kv_u32("gpt-oss.attention.value_length", 8).kv_u32("gpt-oss.attention.sliding_window", 16);
}

// A file with `keys` and every listed tensor (zeros, F32), after `edit` may change the list.
using Edit = std::function<void(std::vector<TensorSpec>&, std::vector<uint32_t>&)>;
GgufFile file_with(const std::function<void(GgufWriter&)>& keys, const std::string& name, const Edit& edit = {}) {
    GgufWriter header;
    keys(header);
    header.tensor("token_embd.weight", kF32, {32, 10}, std::vector<uint8_t>(32 * 10 * 4));
    const auto hp_path = test::temp_path(name + "_header.gguf");
    header.write(hp_path);
    const Hparams hp = Hparams::from_gguf(GgufFile::open(hp_path));
    std::vector<TensorSpec> specs = global_tensors(hp);
    for (int il = 0; il < hp.n_layer; ++il)
        for (auto& s : layer_tensors(hp, il)) specs.push_back(s);
    std::vector<uint32_t> types(specs.size(), kF32);
    if (edit) edit(specs, types);
    GgufWriter w;
    keys(w);
    for (size_t i = 0; i < specs.size(); ++i) {
        const auto& s = specs[i];
        const uint64_t n = uint64_t(s.ne[0]) * s.ne[1] * s.ne[2];
        std::vector<uint64_t> ne{uint64_t(s.ne[0])};
        if (s.ne[1] > 1 || s.ne[2] > 1) ne.push_back(uint64_t(s.ne[1]));
        if (s.ne[2] > 1) ne.push_back(uint64_t(s.ne[2]));
        w.tensor(s.name, types[i], ne, std::vector<uint8_t>(n * (types[i] == kF16 ? 2 : 4)));
    }
    const auto path = test::temp_path(name + ".gguf");
    w.write(path);
    return GgufFile::open(path);
}

std::string check_error(const GgufFile& f) {
    try {
        check_tensors(f, Hparams::from_gguf(f));
    } catch (const FormatError& e) {
        return std::string(e.what()) + " | " + e.hint();
    }
    return "no error";
}

size_t find(const std::vector<TensorSpec>& specs, const std::string& name) {
    for (size_t i = 0; i < specs.size(); ++i)
        if (specs[i].name == name) return i;
    FAIL("no tensor " << name << " in the list");
    return 0;
}

}  // namespace

TEST_CASE("arch tensors: deepseek2's list follows its layers: low-rank queries, split k_b/v_b, dense then routed", "[unit][hparams]") {
    const GgufFile f = file_with(deepseek2_keys, "ds2_complete");
    const Hparams hp = Hparams::from_gguf(f);
    CHECK(check_error(f) == "no error");
    const auto dense = layer_tensors(hp, 0), routed = layer_tensors(hp, 1);
    CHECK(dense[find(dense, "blk.0.attn_q_b.weight")].ne == std::array<int64_t, 3>{24, 4 * 24, 1});
    CHECK(dense[find(dense, "blk.0.attn_kv_a_mqa.weight")].ne == std::array<int64_t, 3>{32, 16 + 8, 1});
    CHECK(dense[find(dense, "blk.0.attn_k_b.weight")].ne == std::array<int64_t, 3>{16, 16, 4});  // nope x latent x heads
    CHECK(dense[find(dense, "blk.0.attn_v_b.weight")].ne == std::array<int64_t, 3>{16, 8, 4});   // latent x v x heads
    CHECK(dense[find(dense, "blk.0.attn_output.weight")].ne == std::array<int64_t, 3>{4 * 8, 32, 1});
    CHECK(dense[find(dense, "blk.0.ffn_down.weight")].ne == std::array<int64_t, 3>{64, 32, 1});
    CHECK(routed[find(routed, "blk.1.ffn_down_exps.weight")].ne == std::array<int64_t, 3>{16, 32, 4});
    CHECK(routed[find(routed, "blk.1.ffn_up_shexp.weight")].ne == std::array<int64_t, 3>{32, 16, 1});
    CHECK_FALSE(routed[find(routed, "blk.1.exp_probs_b.bias")].required);
    for (const auto& s : dense) CHECK(s.name.find("exps") == std::string::npos);
}

TEST_CASE("arch tensors: gpt-oss's list has its biases, sinks and experts", "[unit][hparams]") {
    const GgufFile f = file_with(gpt_oss_keys, "oss_complete");
    const Hparams hp = Hparams::from_gguf(f);
    CHECK(check_error(f) == "no error");
    const auto l = layer_tensors(hp, 1);
    CHECK(l[find(l, "blk.1.attn_sinks.weight")].ne == std::array<int64_t, 3>{4, 1, 1});
    CHECK(l[find(l, "blk.1.attn_k.weight")].ne == std::array<int64_t, 3>{32, 2 * 8, 1});
    CHECK(l[find(l, "blk.1.ffn_up_exps.bias")].ne == std::array<int64_t, 3>{16, 4, 1});
    CHECK(l[find(l, "blk.1.ffn_down_exps.bias")].ne == std::array<int64_t, 3>{32, 4, 1});
    CHECK(global_tensors(hp)[2].required);  // gpt-oss has its own output matrix
}

TEST_CASE("arch tensors: a missing, misshapen or mistyped tensor is named", "[unit][hparams]") {
    struct Broken {
        const char* what;
        std::function<void(GgufWriter&)> keys;
        Edit edit;
        const char* says;
    };
    const Broken cases[] = {
        {"deepseek2 without a layer's latent projection", deepseek2_keys,
         [](auto& s, auto& t) {
             const size_t i = find(s, "blk.1.attn_kv_a_mqa.weight");
             s.erase(s.begin() + i), t.erase(t.begin() + i);
         },
         "model tensor 'blk.1.attn_kv_a_mqa.weight' is missing | a deepseek2 file holds it"},
        {"gpt-oss without its sinks", gpt_oss_keys,
         [](auto& s, auto& t) {
             const size_t i = find(s, "blk.0.attn_sinks.weight");
             s.erase(s.begin() + i), t.erase(t.begin() + i);
         },
         "'blk.0.attn_sinks.weight' is missing"},
        {"experts fused into ffn_gate_up_exps", gpt_oss_keys,
         [](auto& s, auto&) {
             const size_t i = find(s, "blk.0.ffn_gate_exps.weight");
             s[i].name = "blk.0.ffn_gate_up_exps.weight";
         },
         "fuses gate and up experts"},
        {"an expert tensor of the wrong width", deepseek2_keys,
         [](auto& s, auto&) { s[find(s, "blk.1.ffn_up_exps.weight")].ne[1] = 12; },
         "'blk.1.ffn_up_exps.weight' has shape [32 x 12 x 4], expected [32 x 16 x 4]"},
        {"a norm in F16", gpt_oss_keys, [](auto& s, auto& t) { t[find(s, "blk.1.post_attention_norm.weight")] = kF16; },
         "'blk.1.post_attention_norm.weight' has type F16"},
    };
    for (const Broken& b : cases) {
        INFO(b.what);
        CHECK_THAT(check_error(file_with(b.keys, "broken", b.edit)), Catch::Contains(b.says));
    }
    // A deepseek2 file may tie its output to the embeddings.
    CHECK(check_error(file_with(deepseek2_keys, "ds2_tied", [](auto& s, auto& t) {
              const size_t i = find(s, "output.weight");
              s.erase(s.begin() + i), t.erase(t.begin() + i);
          })) == "no error");
}
