#include "runtime/exec/layer_program.h"

#include <algorithm>

namespace strata::runtime {

using LW = LayerWeights;

int64_t act_width(const models::Hparams& hp, Act a) {
    const models::MlaParams& m = hp.mla;
    switch (a) {
        case Act::Q: return hp.n_embd_q();
        case Act::Attn: return m.enabled() ? int64_t(hp.n_head) * m.v_head_dim : hp.n_embd_q();
        case Act::K: return hp.n_embd_kv();
        case Act::V: return m.enabled() ? 0 : hp.n_embd_kv();
        case Act::Gate:
        case Act::Up: return hp.n_ff;
        case Act::QLowRank: return m.q_lora_rank;
        case Act::QLatent: return int64_t(hp.n_head) * m.cache_width();
        case Act::AttnLatent: return int64_t(hp.n_head) * m.kv_lora_rank;
        default: return hp.n_embd;
    }
}

bool row_wise(Op op) { return op != Op::Matmul && op != Op::HeadMatmul && op != Op::Attend && op != Op::Experts; }

namespace {

// The steps of one layer. The feature table decides which tensors a layer has
// (ModelWeights::bind); each optional step is there when its tensor is.
class Builder {
public:
    explicit Builder(const LayerWeights& l) : l_(l) {}

    Builder& norm(Act dst, Act src, LW::Member w) { return add({.op = Op::Norm, .dst = dst, .src = src, .w = w}); }
    Builder& norm_if(Act dst, Act src, LW::Member w) { return l_.*w ? norm(dst, src, w) : *this; }
    Builder& bias_if(Act dst, LW::Member w) { return l_.*w ? add({.op = Op::Bias, .dst = dst, .w = w}) : *this; }
    Builder& head_norm_if(Act dst, LW::Member w, int32_t n_heads) {
        return l_.*w ? add({.op = Op::HeadNorm, .dst = dst, .w = w, .n_heads = n_heads}) : *this;
    }
    Builder& rope(Act dst, int32_t n_heads, int32_t offset = 0) {
        return add({.op = Op::Rope, .dst = dst, .n_heads = n_heads, .offset = offset});
    }
    Builder& head_matmul(Act dst, Act src, LW::Member w, int32_t n_heads) {
        return add({.op = Op::HeadMatmul, .dst = dst, .src = src, .w = w, .n_heads = n_heads});
    }
    Builder& matmul(Act src, std::initializer_list<Product> products) {
        Step s{.op = Op::Matmul, .src = src};
        for (const Product& p : products) s.products[s.n_products++] = p;
        return add(s);
    }
    Builder& op(Op op, Act dst = Act::X, Act src = Act::X, LW::Member w = nullptr) {
        return add({.op = op, .dst = dst, .src = src, .w = w});
    }
    Builder& glu(models::FfnAct act) { return add({.op = Op::Glu, .dst = Act::Gate, .src = Act::Up, .act = act}); }
    std::vector<Step> take() { return std::move(steps_); }

private:
    Builder& add(const Step& s) {
        steps_.push_back(s);
        return *this;
    }
    const LayerWeights& l_;
    std::vector<Step> steps_;
};

// Queries, keys and values from the normed input, each prepared as the architecture does
// (biases, QK-norm, RoPE), the keys and values stored, attention and its output projection
// (gpt-oss: its bias), gemma's post-norm, the residual.
std::vector<Step> attention_steps(const models::Hparams& hp, const LayerWeights& l) {
    Builder b(l);
    b.norm(Act::XN, Act::X, &LW::attn_norm)
        .matmul(Act::XN, {{&LW::wq, Act::Q}, {&LW::wk, Act::K}, {&LW::wv, Act::V}})
        .bias_if(Act::Q, &LW::bq)
        .head_norm_if(Act::Q, &LW::q_norm, hp.n_head)
        .rope(Act::Q, hp.n_head)
        .bias_if(Act::K, &LW::bk)
        .head_norm_if(Act::K, &LW::k_norm, hp.n_head_kv)
        .rope(Act::K, hp.n_head_kv)
        .bias_if(Act::V, &LW::bv)
        .op(Op::StoreKv)
        .op(Op::Attend, Act::Out, Act::Q, &LW::wo)
        .bias_if(Act::Out, &LW::bo)
        .norm_if(Act::Out, Act::Out, &LW::attn_post_norm)
        .op(Op::Add, Act::X, Act::Out);
    return b.take();
}

// Multi-head latent attention in its absorbed form (deepseek2): the queries (through a low rank
// where the model has one) and the cache row (the normed latent, then the RoPE part every head
// shares) from the normed input; each head's query without RoPE taken into the latent space
// (attn_k_b), so that attention reads the cached latent itself as keys and values; each head's
// output taken out of it (attn_v_b), the output projection, the residual.
std::vector<Step> latent_attention_steps(const models::Hparams& hp, const LayerWeights& l) {
    const models::MlaParams& m = hp.mla;
    Builder b(l);
    b.norm(Act::XN, Act::X, &LW::attn_norm);
    if (l.wq_a) {
        b.matmul(Act::XN, {{&LW::wq_a, Act::QLowRank}, {&LW::wkv_a, Act::K}})
            .norm(Act::QLowRank, Act::QLowRank, &LW::q_a_norm)
            .matmul(Act::QLowRank, {{&LW::wq, Act::Q}});
    } else {
        b.matmul(Act::XN, {{&LW::wq, Act::Q}, {&LW::wkv_a, Act::K}});
    }
    b.rope(Act::Q, hp.n_head, m.qk_nope)
        .norm(Act::K, Act::K, &LW::kv_a_norm)
        .rope(Act::K, 1, m.kv_lora_rank)
        .op(Op::StoreKv)
        .head_matmul(Act::QLatent, Act::Q, &LW::wk_b, hp.n_head)
        .op(Op::Attend, Act::AttnLatent, Act::QLatent)
        .head_matmul(Act::Attn, Act::AttnLatent, &LW::wv_b, hp.n_head)
        .matmul(Act::Attn, {{&LW::wo, Act::Out}})
        .op(Op::Add, Act::X, Act::Out);
    return b.take();
}

// The gated feed-forward (SwiGLU or GeGLU) or the mixture of experts, gemma's post-norm, the residual.
std::vector<Step> feed_forward_steps(const models::Hparams& hp, const LayerWeights& l, int il) {
    Builder b(l);
    b.norm(Act::XN, Act::X, &LW::ffn_norm);
    if (hp.moe.in_layer(il)) {
        b.op(Op::Experts, Act::Out, Act::XN);
    } else {
        b.matmul(Act::XN, {{&LW::ffn_gate, Act::Gate}, {&LW::ffn_up, Act::Up}})
            .glu(hp.ffn_act)
            .matmul(Act::Gate, {{&LW::ffn_down, Act::Out}});
    }
    b.norm_if(Act::Out, Act::Out, &LW::ffn_post_norm).op(Op::Add, Act::X, Act::Out);
    return b.take();
}

bool makes_kv(Act a) { return a == Act::K || a == Act::V; }

std::vector<Step> key_value_steps(std::span<const Step> attention) {
    std::vector<Step> kv;
    for (const Step& s : attention) {
        if (s.op == Op::Matmul) {
            Step m = s;
            m.n_products = 0;
            for (const Product& p : s.matmul())
                if (makes_kv(p.dst)) m.products[m.n_products++] = p;
            if (m.n_products > 0) kv.push_back(m);
        } else if (s.op == Op::StoreKv) {
            kv.push_back(s);
            break;
        } else if (row_wise(s.op) && makes_kv(s.dst)) {
            kv.push_back(s);
        }
    }
    return kv;
}

RopeSpec rope_spec(const models::Hparams& hp, const ModelWeights& w, int il, int64_t n_ctx) {
    RopeSpec r;
    cpu::RopeParams& p = r.params;
    p.n_rot = hp.n_rot;
    const bool swa = hp.is_swa(il);
    p.freq_base = swa ? hp.rope_freq_base_swa : hp.rope_freq_base;
    p.freq_scale = swa ? hp.rope_freq_scale_swa : hp.rope_freq_scale;
    p.neox = hp.rope_mode == models::RopeMode::NeoX;
    p.attn_factor = hp.rope_attn_factor;
    if (hp.yarn_layer_magnitude) p.attn_factor *= static_cast<float>(models::yarn_mscale(1.0 / p.freq_scale));
    if (hp.yarn_ext_factor != 0.0f) {
        p.ext_factor = hp.yarn_ext_factor;
        const cpu::YarnRamp ramp = cpu::yarn_ramp(p.n_rot, hp.n_ctx_orig, p.freq_base, hp.yarn_beta_fast, hp.yarn_beta_slow);
        p.yarn_low = ramp.low;
        p.yarn_high = ramp.high;
    }
    if (w.rope_freqs) r.factors = RopeFactors::Freqs;
    else if (n_ctx > hp.n_ctx_orig && w.rope_long) r.factors = RopeFactors::Long;
    else if (n_ctx <= hp.n_ctx_orig && w.rope_short) r.factors = RopeFactors::Short;
    return r;
}

}  // namespace

std::vector<LayerProgram> layer_programs(const models::Hparams& hp, const ModelWeights& w, int64_t n_ctx) {
    std::vector<LayerProgram> programs(static_cast<size_t>(hp.n_layer));
    for (int il = 0; il < hp.n_layer; ++il) {
        LayerProgram& p = programs[static_cast<size_t>(il)];
        const LayerWeights& l = w.layers[static_cast<size_t>(il)];
        p.il = il;
        p.rope = rope_spec(hp, w, il, n_ctx);
        p.attention_spec = {.n_head = hp.n_head,
                            .n_head_kv = hp.n_head_kv,
                            .head_dim = hp.mla.enabled() ? hp.mla.cache_width() : hp.head_dim,
                            .v_head_dim = hp.mla.kv_lora_rank,
                            .values_in_keys = hp.mla.enabled(),
                            .window = hp.is_swa(il) ? hp.n_swa : 0,
                            .scale = hp.attn_scale,
                            .softcap = hp.attn_softcap,
                            .sinks = l.attn_sinks ? &LW::attn_sinks : nullptr};
        p.attention = hp.mla.enabled() ? latent_attention_steps(hp, l) : attention_steps(hp, l);
        p.feed_forward = feed_forward_steps(hp, l, il);
        p.key_value = key_value_steps(p.attention);
    }
    return programs;
}

void embed_rows(const models::Hparams& hp, const ModelWeights& w, std::span<const int32_t> tokens, float* x) {
    const int64_t E = hp.n_embd;
    for (size_t t = 0; t < tokens.size(); ++t) {
        float* row = x + static_cast<int64_t>(t) * E;
        dequantize_weight_row(w.tok_embd, tokens[t], row);
        if (hp.embd_scale != 1.0f)
            for (int64_t i = 0; i < E; ++i) row[i] *= hp.embd_scale;
    }
}

}  // namespace strata::runtime
