#include "runtime/weights/listed_layers.h"

#include <string_view>

#include <fmt/format.h>

#include "core/error.h"
#include "models/arch_tensors.h"
#include "models/gguf_file.h"

namespace strata::runtime {

namespace {

using LW = LayerWeights;

// A layer tensor's name after "blk.N." -> its view. The query projection is attn_q_b after a
// low rank, else attn_q; gpt-oss's post_attention_norm is its feed-forward's input norm.
struct Named {
    std::string_view name;
    LW::Member member;
};
constexpr Named kNames[] = {
    {"attn_norm.weight", &LW::attn_norm},         {"attn_q.weight", &LW::wq},
    {"attn_q_b.weight", &LW::wq},                 {"attn_k.weight", &LW::wk},
    {"attn_v.weight", &LW::wv},                   {"attn_output.weight", &LW::wo},
    {"attn_q.bias", &LW::bq},                     {"attn_k.bias", &LW::bk},
    {"attn_v.bias", &LW::bv},                     {"attn_output.bias", &LW::bo},
    {"attn_sinks.weight", &LW::attn_sinks},       {"attn_q_a.weight", &LW::wq_a},
    {"attn_q_a_norm.weight", &LW::q_a_norm},      {"attn_kv_a_mqa.weight", &LW::wkv_a},
    {"attn_kv_a_norm.weight", &LW::kv_a_norm},    {"attn_k_b.weight", &LW::wk_b},
    {"attn_v_b.weight", &LW::wv_b},               {"ffn_norm.weight", &LW::ffn_norm},
    {"post_attention_norm.weight", &LW::ffn_norm}, {"ffn_gate.weight", &LW::ffn_gate},
    {"ffn_up.weight", &LW::ffn_up},               {"ffn_down.weight", &LW::ffn_down},
    {"ffn_gate_inp.weight", &LW::ffn_gate_inp},   {"ffn_gate_inp.bias", &LW::ffn_gate_inp_b},
    {"exp_probs_b.bias", &LW::exp_probs_b},       {"ffn_gate_exps.weight", &LW::ffn_gate_exps},
    {"ffn_up_exps.weight", &LW::ffn_up_exps},     {"ffn_down_exps.weight", &LW::ffn_down_exps},
    {"ffn_gate_exps.bias", &LW::ffn_gate_exps_b}, {"ffn_up_exps.bias", &LW::ffn_up_exps_b},
    {"ffn_down_exps.bias", &LW::ffn_down_exps_b}, {"ffn_gate_shexp.weight", &LW::ffn_gate_shexp},
    {"ffn_up_shexp.weight", &LW::ffn_up_shexp},   {"ffn_down_shexp.weight", &LW::ffn_down_shexp},
};

LW::Member member_for(std::string_view name) {
    for (const Named& n : kNames)
        if (n.name == name) return n.member;
    throw UsageError(fmt::format("no LayerWeights view for the listed tensor '{}'", name),
                     "an internal error (runtime/weights/listed_layers.cpp lacks a name); please report it");
}

}  // namespace

void bind_listed_layers(const models::GgufFile& f, const models::Hparams& hp, std::vector<LayerWeights>& layers) {
    if (hp.mla.enabled() && !hp.mla.split_kv_b)
        throw FormatError("this deepseek2 file holds attn_kv_b, the latent's key and value expansions in one tensor (an "
                          "older conversion); Strata runs latent attention in its absorbed form from attn_k_b and attn_v_b",
                          "convert the model again with a current llama.cpp (convert_hf_to_gguf.py), which writes "
                          "attn_k_b and attn_v_b");
    layers.assign(static_cast<size_t>(hp.n_layer), {});
    for (int il = 0; il < hp.n_layer; ++il) {
        const std::string prefix = fmt::format("blk.{}.", il);
        for (const models::TensorSpec& s : models::layer_tensors(hp, il)) {
            const models::TensorInfo* t = f.find_tensor(s.name);
            if (!t) continue;  // optional and absent (check_tensors saw the required ones)
            WeightRef& w = layers[static_cast<size_t>(il)].*member_for(std::string_view(s.name).substr(prefix.size()));
            w = {t, f.data(*t), t->type, s.ne[0], s.ne[1], s.ne[2]};
        }
    }
}

}  // namespace strata::runtime
