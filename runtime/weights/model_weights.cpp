#include "runtime/weights/model_weights.h"

#include <fmt/format.h>

#include "core/error.h"
#include "cpu/quant.h"
#include "models/gguf_file.h"

namespace strata::runtime {

namespace {

struct Binder {
    const models::GgufFile& f;

    WeightRef get(const std::string& name, int64_t cols, int64_t rows, bool required = true, bool weight = true) const {
        const models::TensorInfo* t = f.find_tensor(name);
        if (!t) {
            if (!required) return {};
            throw FormatError(fmt::format("model tensor '{}' is missing", name),
                              "the file is incomplete or not a llama-family model");
        }
        const int64_t got_rows = t->n_rows();
        if (t->ne[0] != cols || got_rows != rows)
            throw FormatError(fmt::format("model tensor '{}' has shape [{} x {}], expected [{} x {}]", name, t->ne[0],
                                          got_rows, cols, rows),
                              "the metadata and tensors disagree: the file is corrupt");
        if (!traits(t->type).computable || (!weight && t->type != DType::F32))
            throw FormatError(fmt::format("model tensor '{}' has type {}, which Strata cannot compute with", name,
                                          dtype_name(t->type)),
                              fmt::format("use a model quantized to one of: {}", computable_dtype_list()));
        return {t, f.data(*t), t->type, cols, rows};
    }
    WeightRef vec(const std::string& name, int64_t n, bool required = true) const {
        return get(name, n, 1, required, false);
    }
};

}  // namespace

ModelWeights ModelWeights::bind(const models::GgufFile& f, const models::Hparams& hp) {
    Binder b{f};
    ModelWeights w;
    w.tok_embd = b.get("token_embd.weight", hp.n_embd, hp.n_vocab);
    w.output_norm = b.vec("output_norm.weight", hp.n_embd);
    w.output = b.get("output.weight", hp.n_embd, hp.n_vocab, false);
    if (!w.output) w.output = w.tok_embd;
    w.rope_freqs = b.vec("rope_freqs.weight", hp.n_rot / 2, false);

    const int64_t q = hp.n_embd_q(), kv = hp.n_embd_kv();
    for (int il = 0; il < hp.n_layer; ++il) {
        auto n = [il](const char* what) { return fmt::format("blk.{}.{}", il, what); };
        LayerWeights l;
        l.attn_norm = b.vec(n("attn_norm.weight"), hp.n_embd);
        l.wq = b.get(n("attn_q.weight"), hp.n_embd, q);
        l.wk = b.get(n("attn_k.weight"), hp.n_embd, kv);
        l.wv = b.get(n("attn_v.weight"), hp.n_embd, kv);
        l.wo = b.get(n("attn_output.weight"), q, hp.n_embd);
        l.bq = b.vec(n("attn_q.bias"), q, hp.qkv_bias);
        l.bk = b.vec(n("attn_k.bias"), kv, hp.qkv_bias);
        l.bv = b.vec(n("attn_v.bias"), kv, hp.qkv_bias);
        l.ffn_norm = b.vec(n("ffn_norm.weight"), hp.n_embd);
        l.ffn_gate = b.get(n("ffn_gate.weight"), hp.n_embd, hp.n_ff);
        l.ffn_up = b.get(n("ffn_up.weight"), hp.n_embd, hp.n_ff);
        l.ffn_down = b.get(n("ffn_down.weight"), hp.n_ff, hp.n_embd);
        w.layers.push_back(l);
    }
    return w;
}

uint64_t ModelWeights::total_bytes() const {
    uint64_t sum = tok_embd.info->nbytes + output_norm.info->nbytes;
    if (output.info != tok_embd.info) sum += output.info->nbytes;
    for (const auto& l : layers)
        for (const WeightRef* r : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.bq, &l.bk, &l.bv, &l.ffn_norm,
                                   &l.ffn_gate, &l.ffn_up, &l.ffn_down})
            if (*r) sum += r->info->nbytes;
    return sum;
}

void dequantize_weight_row(const WeightRef& w, int64_t row, float* dst) {
    if (w.tiled) return cpu::dequantize_tiled_rows(w.type, w.data, w.n_rows, w.n_cols, row, 1, dst);
    cpu::dequantize_row(w.type, static_cast<const std::byte*>(w.data) + row * row_bytes(w.type, w.n_cols), dst, w.n_cols);
}

uint64_t ModelWeights::decode_bytes() const {
    return total_bytes() - (output.info != tok_embd.info ? tok_embd.info->nbytes : 0);
}

}  // namespace strata::runtime
