#include "models/arch_tensors.h"

#include <fmt/format.h>

#include "core/error.h"
#include "models/gguf_file.h"

namespace strata::models {

namespace {

std::string blk(int il, const char* name) { return fmt::format("blk.{}.{}", il, name); }
TensorSpec vec(std::string name, int64_t n, bool required = true) { return {std::move(name), {n, 1, 1}, required, false}; }
TensorSpec mat(std::string name, int64_t cols, int64_t rows, int64_t mats = 1) { return {std::move(name), {cols, rows, mats}}; }

// llama.cpp's src/models/deepseek2.cpp: latent attention, then a dense or a routed feed-forward.
void deepseek2_layer(const Hparams& hp, int il, std::vector<TensorSpec>& t) {
    const MlaParams& m = hp.mla;
    const int64_t E = hp.n_embd, H = hp.n_head;
    t.push_back(vec(blk(il, "attn_norm.weight"), E));
    if (m.q_lora_rank > 0) {
        t.push_back(vec(blk(il, "attn_q_a_norm.weight"), m.q_lora_rank));
        t.push_back(mat(blk(il, "attn_q_a.weight"), E, m.q_lora_rank));
        t.push_back(mat(blk(il, "attn_q_b.weight"), m.q_lora_rank, H * m.k_head_dim()));
    } else {
        t.push_back(mat(blk(il, "attn_q.weight"), E, H * m.k_head_dim()));
    }
    t.push_back(vec(blk(il, "attn_kv_a_norm.weight"), m.kv_lora_rank));
    t.push_back(mat(blk(il, "attn_kv_a_mqa.weight"), E, m.cache_width()));
    if (m.split_kv_b) {
        t.push_back(mat(blk(il, "attn_k_b.weight"), m.qk_nope, m.kv_lora_rank, H));
        t.push_back(mat(blk(il, "attn_v_b.weight"), m.kv_lora_rank, m.v_head_dim, H));
    } else {
        t.push_back(mat(blk(il, "attn_kv_b.weight"), m.kv_lora_rank, H * (m.qk_nope + m.v_head_dim)));
    }
    t.push_back(mat(blk(il, "attn_output.weight"), H * m.v_head_dim, E));
    t.push_back(vec(blk(il, "ffn_norm.weight"), E));
    const MoeParams& x = hp.moe;
    if (!x.in_layer(il)) {
        t.push_back(mat(blk(il, "ffn_gate.weight"), E, hp.n_ff));
        t.push_back(mat(blk(il, "ffn_up.weight"), E, hp.n_ff));
        t.push_back(mat(blk(il, "ffn_down.weight"), hp.n_ff, E));
        return;
    }
    t.push_back(mat(blk(il, "ffn_gate_inp.weight"), E, x.n_expert));
    t.push_back(vec(blk(il, "exp_probs_b.bias"), x.n_expert, false));  // DeepSeek-V3's selection bias
    t.push_back(mat(blk(il, "ffn_gate_exps.weight"), E, x.n_ff_exp, x.n_expert));
    t.push_back(mat(blk(il, "ffn_up_exps.weight"), E, x.n_ff_exp, x.n_expert));
    t.push_back(mat(blk(il, "ffn_down_exps.weight"), x.n_ff_exp, E, x.n_expert));
    if (x.n_ff_shexp > 0) {
        t.push_back(mat(blk(il, "ffn_gate_shexp.weight"), E, x.n_ff_shexp));
        t.push_back(mat(blk(il, "ffn_up_shexp.weight"), E, x.n_ff_shexp));
        t.push_back(mat(blk(il, "ffn_down_shexp.weight"), x.n_ff_shexp, E));
    }
}

// llama.cpp's src/models/openai-moe.cpp: biased attention with sinks, then biased experts.
void gpt_oss_layer(const Hparams& hp, int il, std::vector<TensorSpec>& t) {
    const int64_t E = hp.n_embd, Q = hp.n_embd_q(), KV = hp.n_head_kv * hp.head_dim;
    const MoeParams& x = hp.moe;
    t.push_back(vec(blk(il, "attn_norm.weight"), E));
    t.push_back(mat(blk(il, "attn_q.weight"), E, Q));
    t.push_back(vec(blk(il, "attn_q.bias"), Q));
    t.push_back(mat(blk(il, "attn_k.weight"), E, KV));
    t.push_back(vec(blk(il, "attn_k.bias"), KV));
    t.push_back(mat(blk(il, "attn_v.weight"), E, KV));
    t.push_back(vec(blk(il, "attn_v.bias"), KV));
    t.push_back(mat(blk(il, "attn_output.weight"), Q, E));
    t.push_back(vec(blk(il, "attn_output.bias"), E));
    t.push_back(vec(blk(il, "attn_sinks.weight"), hp.n_head));
    t.push_back(vec(blk(il, "post_attention_norm.weight"), E));  // the feed-forward's input norm
    t.push_back(mat(blk(il, "ffn_gate_inp.weight"), E, x.n_expert));
    t.push_back(vec(blk(il, "ffn_gate_inp.bias"), x.n_expert));
    t.push_back(mat(blk(il, "ffn_gate_exps.weight"), E, x.n_ff_exp, x.n_expert));
    t.push_back({blk(il, "ffn_gate_exps.bias"), {x.n_ff_exp, x.n_expert, 1}, true, false});
    t.push_back(mat(blk(il, "ffn_up_exps.weight"), E, x.n_ff_exp, x.n_expert));
    t.push_back({blk(il, "ffn_up_exps.bias"), {x.n_ff_exp, x.n_expert, 1}, true, false});
    t.push_back(mat(blk(il, "ffn_down_exps.weight"), x.n_ff_exp, E, x.n_expert));
    t.push_back({blk(il, "ffn_down_exps.bias"), {E, x.n_expert, 1}, true, false});
}

std::string shape_text(const std::array<int64_t, 4>& ne) { return fmt::format("[{} x {} x {}]", ne[0], ne[1], ne[2]); }

}  // namespace

bool has_tensor_list(Arch arch) { return arch == Arch::DeepSeek2 || arch == Arch::GptOss; }

std::vector<TensorSpec> global_tensors(const Hparams& hp) {
    TensorSpec output = mat("output.weight", hp.n_embd, hp.n_vocab);
    output.required = hp.arch == Arch::GptOss;  // deepseek2 may tie it to the embeddings
    return {mat("token_embd.weight", hp.n_embd, hp.n_vocab), vec("output_norm.weight", hp.n_embd), output};
}

std::vector<TensorSpec> layer_tensors(const Hparams& hp, int il) {
    std::vector<TensorSpec> t;
    if (hp.arch == Arch::DeepSeek2) deepseek2_layer(hp, il, t);
    else if (hp.arch == Arch::GptOss) gpt_oss_layer(hp, il, t);
    else
        throw UsageError(fmt::format("no tensor list for {} in models/arch_tensors", arch_name(hp.arch)));
    return t;
}

void check_tensors(const GgufFile& f, const Hparams& hp) {
    auto check = [&](const TensorSpec& s) {
        const TensorInfo* t = f.find_tensor(s.name);
        if (!t) {
            if (!s.required) return;
            std::string hint = fmt::format("a {} file holds it: the file is incomplete, or from a converter Strata does not know",
                                           arch_name(hp.arch));
            const std::string gate = "ffn_gate_exps.weight";
            if (s.name.ends_with(gate) && f.find_tensor(s.name.substr(0, s.name.size() - gate.size()) + "ffn_gate_up_exps.weight"))
                hint = "this file fuses gate and up experts (ffn_gate_up_exps); Strata reads them as two tensors";
            throw FormatError(fmt::format("model tensor '{}' is missing", s.name), hint);
        }
        if (t->ne[0] != s.ne[0] || t->ne[1] != s.ne[1] || t->ne[2] != s.ne[2] || t->ne[3] != 1)
            throw FormatError(fmt::format("model tensor '{}' has shape {}, expected {}", s.name, shape_text(t->ne),
                                          shape_text({s.ne[0], s.ne[1], s.ne[2], 1})),
                              "the metadata and tensors disagree: the file is corrupt");
        if (s.matrix ? !traits(t->type).computable : t->type != DType::F32)
            throw FormatError(fmt::format("model tensor '{}' has type {}, which Strata cannot compute with", s.name,
                                          dtype_name(t->type)),
                              s.matrix ? fmt::format("use a model quantized to one of: {}", computable_dtype_list())
                                       : std::string("norms, biases and sinks are read as F32"));
    };
    for (const TensorSpec& s : global_tensors(hp)) check(s);
    for (int il = 0; il < hp.n_layer; ++il)
        for (const TensorSpec& s : layer_tensors(hp, il)) check(s);
}

}  // namespace strata::models
