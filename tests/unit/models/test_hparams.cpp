// Hyperparameters of the architectures beyond the llama block, from the GGUF keys llama.cpp's
// converter writes (gguf-py's constants): sliding-window layer patterns, Gemma's defaults,
// mixture-of-experts routing, and the errors for what Strata cannot run.
#include <catch2/catch.hpp>

#include <limits>

#include <cmath>
#include <functional>

#include "core/error.h"
#include "models/gguf_file.h"
#include "models/hparams.h"
#include "tests/support/gguf_writer.h"

using namespace strata;
using namespace strata::models;
using strata::test::GgufWriter;

namespace {

// A header with the keys every architecture needs and a token_embd tensor.
GgufWriter header(const std::string& arch, uint32_t n_layer = 4) {
    GgufWriter w;
    w.kv_string("general.architecture", arch);
    w.kv_u32(arch + ".context_length", 4096).kv_u32(arch + ".embedding_length", 64).kv_u32(arch + ".block_count", n_layer);
    w.kv_u32(arch + ".feed_forward_length", 128).kv_u32(arch + ".attention.head_count", 4);
    w.tensor("token_embd.weight", 0, {64, 8}, std::vector<uint8_t>(64 * 8 * 4, 0));
    return w;
}

Hparams parse(const GgufWriter& w, const std::string& name) {
    const auto p = test::temp_path(name);
    w.write(p);
    return Hparams::from_gguf(GgufFile::open(p));
}

std::string parse_error(const GgufWriter& w, const std::string& name) {
    try {
        parse(w, name);
    } catch (const FormatError& e) {
        return std::string(e.what()) + " | " + e.hint();
    }
    return "no error";
}

}  // namespace

TEST_CASE("hparams: gemma3's sliding window covers 5 of every 6 layers, with the local RoPE base", "[unit][hparams]") {
    auto w = header("gemma3", 12);
    w.kv_u32("gemma3.attention.sliding_window", 512).kv_f32("gemma3.rope.freq_base", 1e6f);
    const Hparams h = parse(w, "hp_gemma3.gguf");
    CHECK(h.n_swa == 512);
    for (int il = 0; il < 12; ++il) CHECK(h.is_swa(il) == (il % 6 != 5));
    CHECK(h.rope_freq_base == 1e6f);
    CHECK(h.rope_freq_base_swa == 10000.0f);
    CHECK(h.embd_scale == Approx(8.0));
    CHECK(h.qk_norm);
    CHECK(h.post_norms);
    CHECK(h.ffn_act == FfnAct::GeluTanh);
    CHECK(h.attn_scale == 0.0f);  // 1/sqrt(head_dim)
}

TEST_CASE("hparams: a sliding-window pattern given as a period or as one flag per layer", "[unit][hparams]") {
    SECTION("period") {
        auto w = header("gemma3", 6);
        w.kv_u32("gemma3.attention.sliding_window", 64).kv_u32("gemma3.attention.sliding_window_pattern", 3);
        const Hparams h = parse(w, "hp_pattern.gguf");
        for (int il = 0; il < 6; ++il) CHECK(h.is_swa(il) == (il % 3 != 2));
    }
    SECTION("flags") {
        auto w = header("gemma3", 4);
        w.kv_u32("gemma3.attention.sliding_window", 64);
        std::vector<uint8_t> payload;
        auto put = [&](uint32_t v) { for (int i = 0; i < 4; ++i) payload.push_back(uint8_t(v >> (8 * i))); };
        put(7);  // bool
        put(4), put(0);  // 4 items (u64)
        for (uint8_t f : {1, 0, 0, 1}) payload.push_back(f);
        w.kv_raw("gemma3.attention.sliding_window_pattern", 9, payload);
        const Hparams h = parse(w, "hp_flags.gguf");
        CHECK((h.is_swa(0) && !h.is_swa(1) && !h.is_swa(2) && h.is_swa(3)));
    }
    SECTION("no window: every layer global") {
        const Hparams h = parse(header("gemma3", 6), "hp_nowindow.gguf");
        for (int il = 0; il < 6; ++il) CHECK_FALSE(h.is_swa(il));
    }
}

TEST_CASE("hparams: gemma2 defaults to a 4096-position window on even layers and caps when told", "[unit][hparams]") {
    auto w = header("gemma2", 4);
    w.kv_f32("gemma2.attn_logit_softcapping", 50.0f).kv_f32("gemma2.final_logit_softcapping", 30.0f);
    const Hparams h = parse(w, "hp_gemma2.gguf");
    CHECK(h.n_swa == 4096);
    CHECK((h.is_swa(0) && !h.is_swa(1) && h.is_swa(2) && !h.is_swa(3)));
    CHECK(h.attn_softcap == 50.0f);
    CHECK(h.final_softcap == 30.0f);
    CHECK_FALSE(h.qk_norm);
}

TEST_CASE("hparams: gemma's 27B models scale queries by n_embd / n_head, as llama.cpp", "[unit][hparams]") {
    auto w = header("gemma3", 62);
    w.kv_u32("gemma3.attention.key_length", 32).kv_u32("gemma3.attention.value_length", 32);
    CHECK(parse(w, "hp_27b.gguf").attn_scale == Approx(1.0 / std::sqrt(16.0)));
}

TEST_CASE("hparams: experts, their width and their router", "[unit][hparams]") {
    SECTION("qwen3moe: its own expert width, softmax, normalised") {
        auto w = header("qwen3moe");
        w.kv_u32("qwen3moe.expert_count", 128).kv_u32("qwen3moe.expert_used_count", 8);
        w.kv_u32("qwen3moe.expert_feed_forward_length", 768);
        const Hparams h = parse(w, "hp_qwen3moe.gguf");
        CHECK(h.moe.enabled());
        CHECK(h.moe.n_ff_exp == 768);
        CHECK(h.moe.gating == ExpertGating::Softmax);
        CHECK(h.moe.norm_weights);
        CHECK(h.n_ff_max() == 768);
    }
    SECTION("mixtral: llama with experts as wide as feed_forward_length; sigmoid router, scaled, not normalised") {
        auto w = header("llama");
        w.kv_u32("llama.expert_count", 8).kv_u32("llama.expert_used_count", 2).kv_u32("llama.expert_gating_func", 2);
        w.kv_raw("llama.expert_weights_norm", 7, {0}).kv_f32("llama.expert_weights_scale", 2.5f);
        const Hparams h = parse(w, "hp_mixtral.gguf");
        CHECK(h.moe.n_ff_exp == 128);
        CHECK(h.moe.gating == ExpertGating::Sigmoid);
        CHECK_FALSE(h.moe.norm_weights);
        CHECK(h.moe.weights_scale == 2.5f);
    }
    SECTION("a dense llama has none") { CHECK_FALSE(parse(header("llama"), "hp_dense.gguf").moe.enabled()); }
}

namespace {

// DeepSeek-V2-Lite's keys as llama.cpp's converter writes them, scaled down: MLA with the split
// k_b / v_b (the *_mla keys), a leading dense layer, shared experts, YaRN with the log multiplier.
GgufWriter deepseek2_lite(uint32_t n_layer = 3) {
    auto w = header("deepseek2", n_layer);
    w.kv_u32("deepseek2.attention.head_count_kv", 1).kv_u32("deepseek2.attention.kv_lora_rank", 32);
    w.kv_u32("deepseek2.attention.key_length", 48).kv_u32("deepseek2.attention.value_length", 32);
    w.kv_u32("deepseek2.attention.key_length_mla", 40).kv_u32("deepseek2.attention.value_length_mla", 24);
    w.kv_u32("deepseek2.rope.dimension_count", 16).kv_u32("deepseek2.leading_dense_block_count", 1);
    w.kv_u32("deepseek2.expert_count", 8).kv_u32("deepseek2.expert_used_count", 2);
    w.kv_u32("deepseek2.expert_shared_count", 2).kv_u32("deepseek2.expert_feed_forward_length", 24);
    w.kv_string("deepseek2.rope.scaling.type", "yarn").kv_f32("deepseek2.rope.scaling.factor", 40.0f);
    w.kv_u32("deepseek2.rope.scaling.original_context_length", 4096);
    w.kv_f32("deepseek2.rope.scaling.yarn_log_multiplier", 0.0707f);
    return w;
}

}  // namespace

TEST_CASE("hparams: deepseek2's latent attention, its experts and its YaRN attention scale", "[unit][hparams]") {
    SECTION("V2-Lite: queries straight from the hidden state, softmax routing, not normalised") {
        const Hparams h = parse(deepseek2_lite(), "hp_ds2.gguf");
        CHECK(h.mla.enabled());
        CHECK(h.mla.q_lora_rank == 0);
        CHECK(h.mla.kv_lora_rank == 32);
        CHECK(h.mla.qk_rope == 16);
        CHECK(h.mla.qk_nope == 24);
        CHECK(h.mla.v_head_dim == 24);
        CHECK(h.mla.split_kv_b);
        CHECK(h.head_dim == 40);
        CHECK(h.n_head_kv == 1);
        CHECK(h.n_embd_kv() == 48);  // the cached latent and RoPE part
        CHECK(h.n_embd_q() == 4 * 40);
        CHECK(h.rope_mode == RopeMode::Normal);
        CHECK_FALSE(h.moe.in_layer(0));
        CHECK(h.moe.in_layer(2));
        CHECK(h.moe.n_ff_shexp == 48);
        CHECK(h.n_ff_max() == 128);
        CHECK(h.moe.gating == ExpertGating::Softmax);
        CHECK_FALSE(h.moe.norm_weights);
        CHECK(h.yarn_ext_factor == 1.0f);
        CHECK(h.rope_freq_scale == Approx(1.0 / 40));
        CHECK(h.n_ctx_orig == 4096);
        // The rotation keeps its length; the scale carries (0.1 * 0.707 * ln 40 + 1)^2 / sqrt(40).
        CHECK(h.rope_attn_factor == 1.0f);
        const double m = 0.1 * 0.707 * std::log(40.0) + 1.0;
        CHECK(h.attn_scale == Approx(m * m / std::sqrt(40.0)).epsilon(1e-5));
    }
    SECTION("every layer dense (leading_dense_block_count = block_count): no experts to route, a dense model") {
        const Hparams h = parse(deepseek2_lite(1), "hp_ds2_dense.gguf");
        CHECK(h.mla.enabled());
        CHECK_FALSE(h.moe.enabled());
        CHECK_FALSE(h.moe.in_layer(0));
        CHECK(h.n_ff_max() == h.n_ff);
    }
    SECTION("V3: low-rank queries, sigmoid routing in groups, normalised and scaled") {
        auto w = deepseek2_lite(4);
        w.kv_u32("deepseek2.attention.q_lora_rank", 20).kv_u32("deepseek2.expert_gating_func", 2);
        w.kv_u32("deepseek2.expert_group_count", 4).kv_u32("deepseek2.expert_group_used_count", 2);
        w.kv_raw("deepseek2.expert_weights_norm", 7, {1}).kv_f32("deepseek2.expert_weights_scale", 2.5f);
        const Hparams h = parse(w, "hp_ds3.gguf");
        CHECK(h.mla.q_lora_rank == 20);
        CHECK(h.moe.gating == ExpertGating::Sigmoid);
        CHECK(h.moe.n_group == 4);
        CHECK(h.moe.n_group_used == 2);
        CHECK(h.moe.norm_weights);
        CHECK(h.moe.weights_scale == 2.5f);
    }
    SECTION("an older conversion: per-head sizes as key/value length, one attn_kv_b") {
        auto w = header("deepseek2", 2);
        w.kv_u32("deepseek2.attention.head_count_kv", 4).kv_u32("deepseek2.attention.kv_lora_rank", 32);
        w.kv_u32("deepseek2.attention.key_length", 40).kv_u32("deepseek2.attention.value_length", 24);
        w.kv_u32("deepseek2.rope.dimension_count", 16).kv_u32("deepseek2.expert_count", 4);
        w.kv_u32("deepseek2.expert_used_count", 2).kv_u32("deepseek2.expert_feed_forward_length", 24);
        const Hparams h = parse(w, "hp_ds2_legacy.gguf");
        CHECK_FALSE(h.mla.split_kv_b);
        CHECK(h.head_dim == 40);
        CHECK(h.mla.v_head_dim == 24);
        CHECK(h.n_head_kv == 1);
        CHECK(h.moe.n_ff_shexp == 0);
        CHECK(h.attn_scale == Approx(1.0 / std::sqrt(40.0)));  // no YaRN: 1/sqrt(key head)
    }
}

TEST_CASE("hparams: gpt-oss slides on every other layer, rotates by YaRN's magnitude, routes by the chosen logits", "[unit][hparams]") {
    auto w = header("gpt-oss", 4);
    w.kv_u32("gpt-oss.attention.head_count_kv", 2).kv_u32("gpt-oss.attention.key_length", 16);
    w.kv_u32("gpt-oss.attention.value_length", 16).kv_u32("gpt-oss.attention.sliding_window", 128);
    w.kv_f32("gpt-oss.rope.freq_base", 150000.0f).kv_u32("gpt-oss.expert_count", 8).kv_u32("gpt-oss.expert_used_count", 2);
    w.kv_u32("gpt-oss.expert_feed_forward_length", 96);
    w.kv_string("gpt-oss.rope.scaling.type", "yarn").kv_f32("gpt-oss.rope.scaling.factor", 32.0f);
    w.kv_u32("gpt-oss.rope.scaling.original_context_length", 4096);
    const Hparams h = parse(w, "hp_gptoss.gguf");
    CHECK(h.n_swa == 128);
    for (int il = 0; il < 4; ++il) CHECK(h.is_swa(il) == (il % 2 == 0));
    CHECK(h.rope_freq_base_swa == 150000.0f);  // window layers rotate as the others
    CHECK(h.rope_freq_scale_swa == h.rope_freq_scale);
    CHECK(h.rope_mode == RopeMode::NeoX);
    CHECK(h.yarn_ext_factor == 1.0f);
    CHECK(h.yarn_beta_fast == 32.0f);
    CHECK(h.yarn_beta_slow == 1.0f);
    CHECK(h.rope_attn_factor == 1.0f);  // the magnitude is each layer's, from its own scale
    CHECK(h.yarn_layer_magnitude);
    CHECK(h.attn_scale == 0.0f);
    CHECK(h.attn_sinks);
    CHECK(h.attn_out_bias);
    CHECK(h.qkv_bias);
    CHECK(h.ffn_act == FfnAct::SiluClamped);
    CHECK(h.swiglu_alpha == 1.702f);
    CHECK(h.swiglu_limit == 7.0f);
    CHECK(h.moe.gating == ExpertGating::SoftmaxChosen);
    CHECK_FALSE(h.moe.norm_weights);
    CHECK(h.moe.n_ff_exp == 96);
    CHECK_FALSE(h.mla.enabled());
}

TEST_CASE("hparams: what Strata cannot run is refused with the reason", "[unit][hparams]") {
    struct Refusal {
        const char* what;
        const char* arch;
        std::function<void(GgufWriter&)> keys;
        const char* says;
    };
    const Refusal cases[] = {
        {"qwen3moe without its expert count", "qwen3moe", [](GgufWriter&) {}, "qwen3moe.expert_count' is missing"},
        {"more experts used than there are", "qwen3moe",
         [](GgufWriter& w) { w.kv_u32("qwen3moe.expert_count", 4).kv_u32("qwen3moe.expert_used_count", 6); },
         "expert_used_count 6 is more than expert_count 4"},
        {"a router Strata does not have", "qwen3moe",
         [](GgufWriter& w) {
             w.kv_u32("qwen3moe.expert_count", 4).kv_u32("qwen3moe.expert_used_count", 2).kv_u32("qwen3moe.expert_gating_func", 4);
         },
         "softmax (1) or sigmoid (2)"},
        {"value heads of another size than key heads", "qwen3",
         [](GgufWriter& w) { w.kv_u32("qwen3.attention.key_length", 32).kv_u32("qwen3.attention.value_length", 16); },
         "value heads of 16"},
        {"deepseek2 whose cached row is not the latent and the RoPE part", "deepseek2",
         [](GgufWriter& w) {
             w.kv_u32("deepseek2.attention.kv_lora_rank", 32).kv_u32("deepseek2.attention.key_length", 50);
             w.kv_u32("deepseek2.attention.key_length_mla", 40).kv_u32("deepseek2.attention.value_length_mla", 24);
             w.kv_u32("deepseek2.rope.dimension_count", 16).kv_u32("deepseek2.expert_count", 4);
             w.kv_u32("deepseek2.expert_used_count", 2);
         },
         "key_length 50 is not kv_lora_rank 32 + RoPE dimensions 16"},
        {"experts that do not split into equal groups", "deepseek2",
         [](GgufWriter& w) {
             w.kv_u32("deepseek2.attention.kv_lora_rank", 32).kv_u32("deepseek2.rope.dimension_count", 8);
             w.kv_u32("deepseek2.expert_count", 6).kv_u32("deepseek2.expert_used_count", 2);
             w.kv_u32("deepseek2.expert_group_count", 4).kv_u32("deepseek2.expert_group_used_count", 2);
         },
         "6 experts in 4 groups"},
        {"a norm's epsilon below 0", "llama", [](GgufWriter& w) { w.kv_f32("llama.attention.layer_norm_rms_epsilon", -1.0f); },
         "layer_norm_rms_epsilon -1 is not a small number of 0 or more"},
        {"a norm's epsilon that is not a number", "llama",
         [](GgufWriter& w) { w.kv_f32("llama.attention.layer_norm_rms_epsilon", std::nanf("")); },
         "layer_norm_rms_epsilon nan"},
        {"a rope base of 0", "llama", [](GgufWriter& w) { w.kv_f32("llama.rope.freq_base", 0.0f); },
         "rope.freq_base 0 is not a finite number above 0"},
        {"a rope base that is not a number", "llama", [](GgufWriter& w) { w.kv_f32("llama.rope.freq_base", std::nanf("")); },
         "rope.freq_base nan"},
        {"an infinite rope scaling factor", "llama",
         [](GgufWriter& w) { w.kv_f32("llama.rope.scaling.factor", std::numeric_limits<float>::infinity()); },
         "rope scaling factor inf is not a finite number"},
        {"a rope scaling factor that is not a number", "llama", [](GgufWriter& w) { w.kv_f32("llama.rope.scaling.factor", std::nanf("")); },
         "rope scaling factor nan"},
        {"an unknown rope scaling type", "qwen3",
         [](GgufWriter& w) { w.kv_string("qwen3.rope.scaling.type", "longrope2").kv_f32("qwen3.rope.scaling.factor", 4.0f); },
         "'longrope2' is not supported"},
    };
    for (const Refusal& r : cases) {
        INFO(r.what);
        auto w = header(r.arch);
        r.keys(w);
        CHECK_THAT(parse_error(w, "hp_refused.gguf"), Catch::Contains(r.says));
    }
}
