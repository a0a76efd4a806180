// ModelShape::from_catalog: a catalog model's tensors laid out as its family's GGUF files hold
// them (llama-style dense and mixtures of experts, OPT, deepseek2, gpt-oss), in the types asked for.
#include <initializer_list>
#include <optional>

#include <fmt/format.h>

#include "core/error.h"
#include "models/arch.h"
#include "planner/catalog.h"
#include "planner/layer_device_ops.h"
#include "planner/model_shape.h"

namespace strata::planner {

namespace {

// The weight types of a catalog shape: one type, or llama.cpp's Q4_K_M mix; experts may keep their own.
struct Recipe {
    DType base = DType::F16;
    bool q4_k_m = false;
    std::optional<DType> experts;
    bool eight_experts = false;  // llama.cpp's mix treats a model of exactly 8 experts (Mixtral) apart

    // llama.cpp's use_more_bits: the first and last eighth of the layers and every third between,
    // whose ffn_down and attn_v Q4_K_M makes Q6_K.
    static bool more_bits(int il, int n) { return il < n / 8 || il >= 7 * n / 8 || (il - n / 8) % 3 == 2; }
    DType ffn_down(int il, int n) const { return q4_k_m && more_bits(il, n) ? DType::Q6_K : base; }
    // An 8-expert model's K and V in Q8_0 on every layer, its attention output in Q5_K.
    DType attn_k() const { return q4_k_m && eight_experts ? DType::Q8_0 : base; }
    DType attn_v(int il, int n) const { return q4_k_m && eight_experts ? DType::Q8_0 : ffn_down(il, n); }
    DType attn_output() const { return q4_k_m && eight_experts ? DType::Q5_K : base; }
    DType routed(DType t) const { return experts.value_or(t); }
};

// Adds one tensor of rows x cols (x mats) elements to a layer.
void add(LayerShape& l, DType t, int64_t rows, int64_t cols, int64_t mats = 1) {
    const int64_t n = rows * cols * mats;
    l.weight_bytes += static_cast<uint64_t>(type_bytes(t, static_cast<double>(n)) + 0.5);
    l.n_params += n;
    if (rows > 1 && cols > 1) l.n_matmul_params += n;
}
void add_attn(LayerShape& l, DType t, int64_t rows, int64_t cols, int64_t mats = 1) {
    add(l, t, rows, cols, mats);
    l.n_attn_params += rows * cols * mats;
}
void add_experts(LayerShape& l, DType t, int64_t rows, int64_t cols, int64_t mats) {
    const uint64_t before = l.weight_bytes;
    add(l, t, rows, cols, mats);
    l.expert_bytes += l.weight_bytes - before;
    l.n_expert_params += rows * cols * mats;
}
// The router (F32, as converted GGUFs keep it): n_expert rows of the hidden state's width.
void add_router(LayerShape& l, int64_t n_expert, int64_t d) {
    const uint64_t before = l.weight_bytes;
    add(l, DType::F32, n_expert, d);
    l.router_bytes += l.weight_bytes - before;
}
void add_ffn(LayerShape& l, DType gate_up, DType down, int64_t d, int64_t ff) {
    add(l, gate_up, ff, d), add(l, gate_up, ff, d), add(l, down, d, ff);
}

// src/models/deepseek2.cpp's tensors (models/arch_tensors.cpp lists them).
LayerShape deepseek2_layer(const ModelEntry& e, const Recipe& r, int il) {
    const int64_t d = e.n_embd, h = e.n_head, kh = e.qk_nope + e.qk_rope;
    const DType wt = r.base;
    LayerShape l;
    add(l, DType::F32, 1, 2 * d + e.q_lora_rank + e.kv_lora_rank);  // attn, ffn, q_a and kv_a norms
    if (e.q_lora_rank > 0) add_attn(l, wt, e.q_lora_rank, d), add_attn(l, wt, h * kh, e.q_lora_rank);
    else add_attn(l, wt, h * kh, d);
    add_attn(l, wt, e.kv_lora_rank + e.qk_rope, d);
    add_attn(l, wt, e.kv_lora_rank, e.qk_nope, h);   // attn_k_b
    add_attn(l, wt, e.v_head_dim, e.kv_lora_rank, h);  // attn_v_b
    add_attn(l, wt, d, h * e.v_head_dim);
    const DType down = r.ffn_down(il, e.n_layer);
    if (il < e.n_dense_lead) {
        add_ffn(l, wt, down, d, e.n_ff);
        return l;
    }
    add_router(l, e.n_expert, d);
    add(l, DType::F32, 1, e.n_expert);  // its selection bias (V3)
    add_experts(l, r.routed(wt), e.n_ff_exp, d, 2 * e.n_expert);
    add_experts(l, r.routed(down), d, e.n_ff_exp, e.n_expert);
    if (e.n_expert_shared > 0) add_ffn(l, wt, down, d, int64_t(e.n_ff_exp) * e.n_expert_shared);
    return l;
}

// src/models/openai-moe.cpp's tensors: biased attention with sinks, biased experts.
LayerShape gpt_oss_layer(const ModelEntry& e, const Recipe& r, int il) {
    const int64_t d = e.n_embd, q = int64_t(e.n_head) * e.head_dim, kv = int64_t(e.n_head_kv) * e.head_dim;
    const DType wt = r.base;
    LayerShape l;
    add(l, DType::F32, 1, 2 * d + q + 2 * kv + d + e.n_head);  // norms, q/k/v/output biases, sinks
    add_attn(l, wt, q, d), add_attn(l, wt, kv, d), add_attn(l, r.attn_v(il, e.n_layer), kv, d), add_attn(l, wt, d, q);
    add_router(l, e.n_expert, d), add(l, DType::F32, 1, e.n_expert);  // and the router's bias
    add_experts(l, r.routed(wt), e.n_ff_exp, d, 2 * e.n_expert);
    add_experts(l, r.routed(r.ffn_down(il, e.n_layer)), d, e.n_ff_exp, e.n_expert);
    add(l, DType::F32, 1, (2 * int64_t(e.n_ff_exp) + d) * e.n_expert);  // the experts' biases
    return l;
}

// A llama-style mixture of experts (Mixtral, OLMoE): llama's attention (OLMoE adds RMSNorms on
// q and k), then a router (F32, as converted GGUFs keep it) over experts n_ff_exp wide.
LayerShape moe_layer(const ModelEntry& e, const Recipe& r, int il) {
    const int64_t d = e.n_embd, hd = e.head_dim > 0 ? e.head_dim : e.n_embd / e.n_head, q = e.n_head * hd,
                  kv = e.n_head_kv * hd;
    const DType wt = r.base;
    LayerShape l;
    add(l, DType::F32, 1, 2 * d);
    add_attn(l, wt, q, d), add_attn(l, r.attn_k(), kv, d), add_attn(l, r.attn_v(il, e.n_layer), kv, d);
    add_attn(l, r.attn_output(), d, q);
    if (e.family == "olmoe") add(l, DType::F32, 1, q + kv);
    add_router(l, e.n_expert, d);
    add_experts(l, r.routed(wt), e.n_ff_exp, d, 2 * e.n_expert);
    add_experts(l, r.routed(r.ffn_down(il, e.n_layer)), d, e.n_ff_exp, e.n_expert);
    return l;
}

LayerShape dense_layer(const ModelEntry& e, const Recipe& r, int il) {
    const int64_t d = e.n_embd, hd = e.head_dim > 0 ? e.head_dim : e.n_embd / e.n_head, q = e.n_head * hd,
                  kv = e.n_head_kv * hd, ff = e.n_ff;
    const DType wt = r.base;
    LayerShape l;
    if (e.family == "opt") {
        // Pre-LayerNorm with biases everywhere: q, k, v, out_proj, fc1, fc2.
        add(l, DType::F32, 1, 4 * d);  // two LayerNorms, weight + bias
        for (int i = 0; i < 4; ++i) add_attn(l, wt, d, d), add(l, DType::F32, 1, d);
        add(l, wt, ff, d), add(l, DType::F32, 1, ff);
        add(l, wt, d, ff), add(l, DType::F32, 1, d);
    } else {
        // llama-style: RMSNorms, q/k/v/o, gated FFN (gate, up, down); qwen2 adds q/k/v biases.
        add(l, DType::F32, 1, 2 * d);
        add_attn(l, wt, q, d), add_attn(l, wt, kv, d), add_attn(l, r.attn_v(il, e.n_layer), kv, d), add_attn(l, wt, d, q);
        add_ffn(l, wt, r.ffn_down(il, e.n_layer), d, ff);
        if (e.family == "qwen2") add(l, DType::F32, 1, q + 2 * kv);
    }
    return l;
}

// The tensors that decide a layer's device ops (layer_device_ops.h), as the family's files hold them.
LayerOpTensors op_tensors(const ModelEntry& e, const Recipe& r, int il, bool dense) {
    LayerOpTensors t;
    auto add = [&](std::initializer_list<std::string_view> names, DType type) {
        for (std::string_view n : names) t.add(n, type);
    };
    if (e.family == "deepseek2") add({e.q_lora_rank > 0 ? "attn_q_a.weight" : "attn_q.weight", "attn_kv_a_mqa.weight"}, r.base);
    else add({"attn_q.weight"}, r.base), add({"attn_k.weight"}, r.attn_k()), add({"attn_v.weight"}, r.attn_v(il, e.n_layer));
    if (e.family == "qwen2" || e.family == "gpt-oss") add({"attn_q.bias", "attn_k.bias", "attn_v.bias"}, DType::F32);
    if (e.family == "gpt-oss") add({"attn_output.bias", "ffn_gate_exps.bias", "ffn_up_exps.bias", "ffn_down_exps.bias"}, DType::F32);
    if (e.family == "olmoe") add({"attn_q_norm.weight", "attn_k_norm.weight"}, DType::F32);
    if (dense) add({"ffn_gate.weight", "ffn_up.weight"}, r.base);
    else add({"ffn_gate_exps.weight", "ffn_up_exps.weight"}, r.routed(r.base));
    return t;
}

ModelShape build(const ModelEntry& e, const Recipe& r, DType kv_type) {
    ModelShape m;
    m.name = e.name;
    m.family = e.family;
    m.source = "catalog";
    m.n_layer = e.n_layer;
    m.n_embd = e.n_embd;
    m.n_head = e.n_head;
    m.n_head_kv = e.n_head_kv;
    m.head_dim = e.head_dim > 0 ? e.head_dim : e.n_embd / e.n_head;
    m.n_ff = e.n_ff;
    m.n_vocab = e.n_vocab;
    m.n_ctx_train = e.n_ctx_train;
    m.n_expert = e.n_expert;
    m.n_expert_used = e.n_expert_used;
    m.weight_type = e.n_expert > 0 && r.experts ? *r.experts : r.base;  // the type holding most matmul bytes
    m.kv_type = kv_type;
    if (e.family == "deepseek2") m.kv_latent = m.head_dim = e.kv_lora_rank + e.qk_rope;
    if (e.family == "gpt-oss") m.n_swa = e.n_swa, m.n_layer_swa = (e.n_layer + 1) / 2;  // the even layers
    // OPT and OLMoE are shapes Strata does not run: their device ops are not counted.
    const std::optional<models::ArchTraits> arch = models::find_arch(e.family);
    for (int il = 0; il < e.n_layer; ++il) {
        m.layers.push_back(e.family == "deepseek2" ? deepseek2_layer(e, r, il)
                           : e.family == "gpt-oss" ? gpt_oss_layer(e, r, il)
                           : e.n_expert > 0        ? moe_layer(e, r, il)
                                                   : dense_layer(e, r, il));
        const bool dense = e.n_expert == 0 || (e.family == "deepseek2" && il < e.n_dense_lead);
        count_device_ops(m.layers.back(), op_tensors(e, r, il, dense), arch ? &*arch : nullptr, dense);
        m.n_params += m.layers.back().n_params;
    }

    const int64_t vocab_elems = int64_t{e.n_vocab} * e.n_embd;
    const DType output_type = r.q4_k_m ? DType::Q6_K : r.base;
    const int64_t norm_elems = e.family == "opt" ? 2 * e.n_embd : e.n_embd;  // OPT's final LayerNorm has a bias
    m.tied_output = e.tied;
    m.output_matmul_params = vocab_elems;
    m.output_bytes = static_cast<uint64_t>(type_bytes(DType::F32, static_cast<double>(norm_elems)) +
                                           type_bytes(e.tied ? r.base : output_type, static_cast<double>(vocab_elems)) + 0.5);
    m.embd_bytes = e.tied ? 0 : static_cast<uint64_t>(type_bytes(r.base, static_cast<double>(vocab_elems)) + 0.5);
    m.n_params += norm_elems + vocab_elems * (e.tied ? 1 : 2);
    if (e.family == "opt") {
        // Learned positions: n_ctx_train + 2 rows (OPT's offset of 2).
        const int64_t pos = (int64_t{e.n_ctx_train} + 2) * e.n_embd;
        m.other_bytes = static_cast<uint64_t>(type_bytes(DType::F16, static_cast<double>(pos)));
        m.n_params += pos;
    }
    return m;
}

const ModelEntry& entry(std::string_view name) {
    const Catalog& cat = Catalog::builtin();
    const ModelEntry* e = cat.find_model(name);
    if (!e) throw UsageError(fmt::format("unknown model shape '{}'", name), fmt::format("known: {}", cat.model_names()));
    return *e;
}

std::optional<DType> expert_type(const ModelEntry& e) {
    if (e.expert_type.empty()) return std::nullopt;
    return dtype_from_name(e.expert_type);
}

}  // namespace

ModelShape ModelShape::from_catalog(std::string_view name, DType weight_type, DType kv_type) {
    const ModelEntry& e = entry(name);
    return build(e, {weight_type, false, expert_type(e)}, kv_type);
}

ModelShape ModelShape::from_catalog(std::string_view name, std::string_view weight_type, DType kv_type) {
    const ModelEntry& e = entry(name);
    const std::string wanted(!weight_type.empty() ? weight_type : !e.weight_type.empty() ? std::string_view(e.weight_type) : "F16");
    if (wanted == "Q4_K_M" || wanted == "q4_k_m") return build(e, {DType::Q4_K, true, expert_type(e), e.n_expert == 8}, kv_type);
    const auto t = dtype_from_name(wanted);
    if (!t) throw UsageError(fmt::format("--weight-type '{}' is not a GGUF type", wanted), "e.g. F16, Q8_0, Q4_K, Q4_K_M, MXFP4");
    return build(e, {*t, false, expert_type(e)}, kv_type);
}

}  // namespace strata::planner
