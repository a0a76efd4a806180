#include "runtime/weights/model_weights.h"

#include <set>

#include <fmt/format.h>

#include "core/error.h"
#include "cpu/quant.h"
#include "models/arch_tensors.h"
#include "models/gguf_file.h"
#include "runtime/weights/listed_layers.h"

namespace strata::runtime {

namespace {

struct Binder {
    const models::GgufFile& f;

    // A matrix [rows x cols], or `mats` of them (a 3-D tensor); vectors are [n x 1] F32.
    WeightRef get(const std::string& name, int64_t cols, int64_t rows, bool required = true, bool weight = true,
                  int64_t mats = 1) const {
        const models::TensorInfo* t = f.find_tensor(name);
        if (!t) {
            if (!required) return {};
            throw FormatError(fmt::format("model tensor '{}' is missing", name),
                              "the file is incomplete, or its architecture's tensors are not the ones Strata reads");
        }
        if (t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != mats || t->ne[3] != 1)
            throw FormatError(fmt::format("model tensor '{}' has shape [{} x {} x {}], expected [{} x {} x {}]", name,
                                          t->ne[0], t->ne[1], t->ne[2], cols, rows, mats),
                              "the metadata and tensors disagree: the file is corrupt");
        if (!traits(t->type).computable || (!weight && t->type != DType::F32))
            throw FormatError(fmt::format("model tensor '{}' has type {}, which Strata cannot compute with", name,
                                          dtype_name(t->type)),
                              weight ? fmt::format("use a model quantized to one of: {}", computable_dtype_list())
                                     : std::string("norms, biases and sinks are read as F32"));
        return {t, f.data(*t), t->type, cols, rows, mats};
    }
    WeightRef vec(const std::string& name, int64_t n, bool required = true) const {
        return get(name, n, 1, required, false);
    }
};

void bind_attention(const Binder& b, const models::Hparams& hp, const std::string& p, LayerWeights& l) {
    const int64_t E = hp.n_embd, Q = hp.n_embd_q(), KV = hp.n_embd_kv();
    if (b.f.find_tensor(p + "attn_qkv.weight")) {  // phi3: q, k and v rows in one tensor
        const WeightRef qkv = b.get(p + "attn_qkv.weight", E, Q + 2 * KV);
        l.wq = qkv.rows(0, Q);
        l.wk = qkv.rows(Q, KV);
        l.wv = qkv.rows(Q + KV, KV);
    } else {
        l.wq = b.get(p + "attn_q.weight", E, Q);
        l.wk = b.get(p + "attn_k.weight", E, KV);
        l.wv = b.get(p + "attn_v.weight", E, KV);
    }
    l.wo = b.get(p + "attn_output.weight", Q, E);
    l.bq = b.vec(p + "attn_q.bias", Q, hp.qkv_bias);
    l.bk = b.vec(p + "attn_k.bias", KV, hp.qkv_bias);
    l.bv = b.vec(p + "attn_v.bias", KV, hp.qkv_bias);
    l.bo = b.vec(p + "attn_output.bias", E, false);  // as llama.cpp reads it, where a file has it
    if (hp.qk_norm) {
        l.q_norm = b.vec(p + "attn_q_norm.weight", hp.head_dim);
        l.k_norm = b.vec(p + "attn_k_norm.weight", hp.head_dim);
    }
    if (hp.post_norms) l.attn_post_norm = b.vec(p + "post_attention_norm.weight", E);
}

void bind_ffn(const Binder& b, const models::Hparams& hp, const std::string& p, LayerWeights& l) {
    const int64_t E = hp.n_embd;
    l.ffn_norm = b.vec(p + "ffn_norm.weight", E);
    if (hp.post_norms) l.ffn_post_norm = b.vec(p + "post_ffw_norm.weight", E);
    if (const models::MoeParams& m = hp.moe; m.enabled()) {
        l.ffn_gate_inp = b.get(p + "ffn_gate_inp.weight", E, m.n_expert);
        l.ffn_gate_exps = b.get(p + "ffn_gate_exps.weight", E, m.n_ff_exp, true, true, m.n_expert);
        l.ffn_up_exps = b.get(p + "ffn_up_exps.weight", E, m.n_ff_exp, true, true, m.n_expert);
        l.ffn_down_exps = b.get(p + "ffn_down_exps.weight", m.n_ff_exp, E, true, true, m.n_expert);
        if (m.n_ff_shexp > 0) {
            l.ffn_gate_shexp = b.get(p + "ffn_gate_shexp.weight", E, m.n_ff_shexp);
            l.ffn_up_shexp = b.get(p + "ffn_up_shexp.weight", E, m.n_ff_shexp);
            l.ffn_down_shexp = b.get(p + "ffn_down_shexp.weight", m.n_ff_shexp, E);
        }
        return;
    }
    const int64_t F = hp.n_ff;
    if (!b.f.find_tensor(p + "ffn_gate.weight") && hp.arch == models::Arch::Phi3) {  // gate rows, then up rows
        const WeightRef gate_up = b.get(p + "ffn_up.weight", E, 2 * F);
        l.ffn_gate = gate_up.rows(0, F);
        l.ffn_up = gate_up.rows(F, F);
    } else {
        l.ffn_gate = b.get(p + "ffn_gate.weight", E, F);
        l.ffn_up = b.get(p + "ffn_up.weight", E, F);
    }
    l.ffn_down = b.get(p + "ffn_down.weight", F, E);
}

}  // namespace

WeightRef WeightRef::mat(int64_t e) const {
    WeightRef m = *this;
    m.n_mats = 1;
    m.data = static_cast<const std::byte*>(data) + e * mat_bytes();
    m.offset = offset + e * mat_bytes();
    return m;
}

WeightRef WeightRef::rows(int64_t r0, int64_t n) const {
    STRATA_ASSERT(n_mats == 1 && !tiled && r0 + n <= n_rows);
    WeightRef r = *this;
    r.n_rows = n;
    r.data = static_cast<const std::byte*>(data) + r0 * row_bytes(type, n_cols);
    r.offset = offset + r0 * row_bytes(type, n_cols);
    return r;
}

uint64_t file_offset(const models::GgufFile& f, const WeightRef& w) { return f.file_offset(*w.info) + w.offset; }

ModelWeights ModelWeights::bind(const models::GgufFile& f, const models::Hparams& hp) {
    if (models::has_tensor_list(hp.arch)) models::check_tensors(f, hp);
    Binder b{f};
    ModelWeights w;
    w.tok_embd = b.get("token_embd.weight", hp.n_embd, hp.n_vocab);
    w.output_norm = b.vec("output_norm.weight", hp.n_embd);
    w.output = b.get("output.weight", hp.n_embd, hp.n_vocab, false);
    if (!w.output) w.output = w.tok_embd;
    w.rope_freqs = b.vec("rope_freqs.weight", hp.n_rot / 2, false);
    w.rope_long = b.vec("rope_factors_long.weight", hp.n_rot / 2, false);
    w.rope_short = b.vec("rope_factors_short.weight", hp.n_rot / 2, false);
    if (hp.moe.enabled() && f.find_tensor("blk.0.ffn_gate.0.weight"))
        throw FormatError("model tensor 'blk.0.ffn_gate.0.weight' holds one expert: the file stores experts in the layout "
                          "of early Mixtral conversions",
                          "convert the model again with a current llama.cpp (convert_hf_to_gguf.py), which writes each "
                          "layer's experts as one ffn_*_exps tensor");
    w.n_expert = hp.moe.n_expert;
    w.n_expert_used = hp.moe.n_expert_used;
    if (models::has_tensor_list(hp.arch)) {
        bind_listed_layers(f, hp, w.layers);
        return w;
    }
    for (int il = 0; il < hp.n_layer; ++il) {
        const std::string p = fmt::format("blk.{}.", il);
        LayerWeights l;
        l.attn_norm = b.vec(p + "attn_norm.weight", hp.n_embd);
        bind_attention(b, hp, p, l);
        bind_ffn(b, hp, p, l);
        w.layers.push_back(l);
    }
    return w;
}

std::vector<WeightRef*> ModelWeights::fixed() {
    return {&tok_embd, &output, &output_norm, &rope_freqs, &rope_long, &rope_short};
}

std::vector<const WeightRef*> ModelWeights::fixed() const {
    return {&tok_embd, &output, &output_norm, &rope_freqs, &rope_long, &rope_short};
}

uint64_t ModelWeights::total_bytes() const {
    // Views of one tensor (tied output, fused rows) count it once.
    std::set<const models::TensorInfo*> seen;
    uint64_t sum = 0;
    // By tensor, not by data: offloaded experts have no data here (runtime/weights/expert_cache.h).
    auto count = [&](const WeightRef& r) {
        if (r.info && seen.insert(r.info).second) sum += r.info->nbytes;
    };
    for (const WeightRef* r : fixed()) count(*r);
    for (const auto& l : layers)
        for (auto m : LayerWeights::kAll) count(l.*m);
    return sum;
}

void dequantize_weight_row(const WeightRef& w, int64_t row, float* dst) {
    if (w.tiled) return cpu::dequantize_tiled_rows(w.type, w.data, w.n_rows, w.n_cols, row, 1, dst);
    cpu::dequantize_row(w.type, static_cast<const std::byte*>(w.data) + row * row_bytes(w.type, w.n_cols), dst, w.n_cols);
}

uint64_t ModelWeights::decode_bytes() const {
    uint64_t unused = output.info != tok_embd.info ? tok_embd.info->nbytes : 0;
    if (n_expert > 0)
        for (const auto& l : layers)
            for (const WeightRef* e : {&l.ffn_gate_exps, &l.ffn_up_exps, &l.ffn_down_exps})
                unused += e->bytes() / n_expert * (n_expert - n_expert_used);
    return total_bytes() - unused;
}

}  // namespace strata::runtime
