// The tensor lists of deepseek2 and gpt-oss against files written from them and broken on
// purpose: a complete file passes, a missing, misshapen or mistyped tensor is named.
#include <catch2/catch.hpp>

#include <functional>
#include <string>

#include "core/error.h"
#include "models/arch_tensors.h"
#include "models/gguf_file.h"
#include "tests/support/arch_files.h"
#include "tests/support/gguf_writer.h"

using namespace strata;
using namespace strata::models;
using strata::test::GgufWriter;

namespace {

using test::deepseek2_keys;
using test::gpt_oss_keys;
using test::TensorEdit;
constexpr uint32_t kF16 = 1;

GgufFile file_with(const std::function<void(GgufWriter&)>& keys, const std::string& name, const TensorEdit& edit = {}) {
    return GgufFile::open(test::write_arch_file(keys, name, 0, edit));
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
        TensorEdit edit;
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
