#include "planner/model_shape.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include <fmt/format.h>

#include "core/error.h"
#include "models/gguf_file.h"
#include "models/hparams.h"
#include "planner/catalog.h"

namespace strata::planner {

double type_bytes(DType t, double n) {
    const auto& tr = traits(t);
    return n * static_cast<double>(tr.block_bytes) / static_cast<double>(tr.block_elems);
}

uint64_t ModelShape::total_weight_bytes() const {
    uint64_t s = embd_bytes + output_bytes + other_bytes;
    for (const auto& l : layers) s += l.weight_bytes;
    return s;
}

double ModelShape::kv_bytes_per_token() const { return 2.0 * type_bytes(kv_type, n_embd_kv()); }

ModelShape ModelShape::from_gguf(const std::filesystem::path& path) {
    return from_gguf(models::GgufFile::open(path, /*map_data=*/false));
}

ModelShape ModelShape::from_gguf(const models::GgufFile& f) {
    const models::Hparams hp = models::Hparams::from_gguf(f);
    ModelShape m;
    m.name = f.get_string_opt("general.name").value_or(f.path().stem().string());
    m.family = std::string(models::arch_name(hp.arch));
    m.source = f.path().string();
    m.n_layer = hp.n_layer;
    m.n_embd = hp.n_embd;
    m.n_head = hp.n_head;
    m.n_head_kv = hp.n_head_kv;
    m.head_dim = hp.head_dim;
    m.n_ff = hp.n_ff;
    m.n_vocab = hp.n_vocab;
    m.n_ctx_train = hp.n_ctx_train;
    m.n_expert = hp.moe.n_expert;
    m.n_expert_used = hp.moe.n_expert_used;
    m.layers.resize(static_cast<size_t>(hp.n_layer));

    std::map<DType, uint64_t> matmul_bytes_by_type;
    const models::TensorInfo* token_embd = nullptr;
    const models::TensorInfo* output = nullptr;
    for (const auto& t : f.tensors()) {
        m.n_params += t.nelements();
        int layer = -1, used = 0;
        if (std::sscanf(t.name.c_str(), "blk.%d.%n", &layer, &used) == 1 && used > 0) {
            if (layer < 0 || layer >= hp.n_layer)
                throw FormatError(fmt::format("tensor '{}' names layer {} of a {}-layer model", t.name, layer, hp.n_layer));
            auto& l = m.layers[static_cast<size_t>(layer)];
            l.weight_bytes += t.nbytes;
            l.n_params += t.nelements();
            if (t.n_dims >= 2) l.n_matmul_params += t.nelements(), matmul_bytes_by_type[t.type] += t.nbytes;
            if (t.n_dims == 3) l.n_expert_params += t.nelements(), l.expert_bytes += t.nbytes;
        } else if (t.name == "token_embd.weight") {
            token_embd = &t;
        } else if (t.name == "output.weight") {
            output = &t;
            matmul_bytes_by_type[t.type] += t.nbytes;
        } else if (t.name.rfind("output_norm.", 0) == 0) {
            m.output_bytes += t.nbytes;
        } else {
            m.other_bytes += t.nbytes;
        }
    }
    if (!token_embd) throw FormatError("model tensor 'token_embd.weight' is missing");
    m.tied_output = output == nullptr;
    const models::TensorInfo& out = output ? *output : *token_embd;
    m.output_bytes += out.nbytes;
    m.output_matmul_params = out.nelements();
    m.embd_bytes = m.tied_output ? 0 : token_embd->nbytes;
    uint64_t best = 0;
    for (auto [t, b] : matmul_bytes_by_type)
        if (b > best) best = b, m.weight_type = t;
    return m;
}

double ModelShape::read_bytes(const LayerShape& l, double tokens) const {
    if (n_expert == 0) return static_cast<double>(l.weight_bytes);
    // Each of n_expert experts is chosen by a token with probability used / n_expert.
    const double untouched = std::pow(1.0 - double(n_expert_used) / n_expert, std::max(1.0, tokens));
    return static_cast<double>(l.weight_bytes - l.expert_bytes) + static_cast<double>(l.expert_bytes) * (1.0 - untouched);
}

double ModelShape::active_matmul_params(const LayerShape& l) const {
    if (n_expert == 0) return static_cast<double>(l.n_matmul_params);
    return static_cast<double>(l.n_matmul_params - l.n_expert_params) + double(l.n_expert_params) * n_expert_used / n_expert;
}

namespace {

// Adds one tensor of n elements to a layer.
void add(LayerShape& l, DType t, int64_t rows, int64_t cols) {
    const int64_t n = rows * cols;
    l.weight_bytes += static_cast<uint64_t>(type_bytes(t, static_cast<double>(n)) + 0.5);
    l.n_params += n;
    if (rows > 1 && cols > 1) l.n_matmul_params += n;
}

// The routed experts' three matrices (gate, up, down), one 3-D tensor each: n experts of ff x d.
void add_experts(LayerShape& l, DType t, int64_t n, int64_t ff, int64_t d) {
    for (int i = 0; i < 3; ++i) {
        const int64_t elems = n * ff * d;
        const auto bytes = static_cast<uint64_t>(type_bytes(t, static_cast<double>(elems)) + 0.5);
        l.weight_bytes += bytes, l.expert_bytes += bytes;
        l.n_params += elems, l.n_matmul_params += elems, l.n_expert_params += elems;
    }
}

LayerShape layer_of(const ModelEntry& e, DType wt) {
    const int64_t d = e.n_embd, hd = e.n_embd / e.n_head, q = e.n_head * hd, kv = e.n_head_kv * hd, ff = e.n_ff;
    LayerShape l;
    if (e.n_expert > 0) {
        // llama-style attention, then a router (F32, as converted GGUFs keep it) over the experts;
        // OLMoE adds RMSNorms on q and k.
        add(l, DType::F32, 1, 2 * d);
        add(l, wt, q, d), add(l, wt, kv, d), add(l, wt, kv, d), add(l, wt, d, q);
        if (e.family == "olmoe") add(l, DType::F32, 1, q + kv);
        add(l, DType::F32, e.n_expert, d);
        add_experts(l, wt, e.n_expert, ff, d);
    } else if (e.family == "opt") {
        // Pre-LayerNorm with biases everywhere: q, k, v, out_proj, fc1, fc2.
        add(l, DType::F32, 1, 4 * d);  // two LayerNorms, weight + bias
        for (int i = 0; i < 4; ++i) add(l, wt, d, d), add(l, DType::F32, 1, d);
        add(l, wt, ff, d), add(l, DType::F32, 1, ff);
        add(l, wt, d, ff), add(l, DType::F32, 1, d);
    } else {
        // llama-style: RMSNorms, q/k/v/o, gated FFN (gate, up, down); qwen2 adds q/k/v biases.
        add(l, DType::F32, 1, 2 * d);
        add(l, wt, q, d), add(l, wt, kv, d), add(l, wt, kv, d), add(l, wt, d, q);
        add(l, wt, ff, d), add(l, wt, ff, d), add(l, wt, d, ff);
        if (e.family == "qwen2") add(l, DType::F32, 1, q + 2 * kv);
    }
    return l;
}

}  // namespace

ModelShape ModelShape::from_catalog(std::string_view name, DType wt, DType kv_type) {
    const Catalog& cat = Catalog::builtin();
    const ModelEntry* e = cat.find_model(name);
    if (!e) throw UsageError(fmt::format("unknown model shape '{}'", name), fmt::format("known: {}", cat.model_names()));
    ModelShape m;
    m.name = e->name;
    m.family = e->family;
    m.source = "catalog";
    m.n_layer = e->n_layer;
    m.n_embd = e->n_embd;
    m.n_head = e->n_head;
    m.n_head_kv = e->n_head_kv;
    m.head_dim = e->n_embd / e->n_head;
    m.n_ff = e->n_ff;
    m.n_expert = e->n_expert;
    m.n_expert_used = e->n_expert_used;
    m.n_vocab = e->n_vocab;
    m.n_ctx_train = e->n_ctx_train;
    m.weight_type = wt;
    m.kv_type = kv_type;
    m.layers.assign(static_cast<size_t>(e->n_layer), layer_of(*e, wt));
    for (const auto& l : m.layers) m.n_params += l.n_params;

    const int64_t vocab_elems = int64_t{e->n_vocab} * e->n_embd;
    const auto table_bytes = static_cast<uint64_t>(type_bytes(wt, static_cast<double>(vocab_elems)) + 0.5);
    const int64_t norm_elems = e->family == "opt" ? 2 * e->n_embd : e->n_embd;  // OPT's final LayerNorm has a bias
    m.tied_output = e->tied;
    m.output_matmul_params = vocab_elems;
    m.output_bytes = static_cast<uint64_t>(type_bytes(DType::F32, static_cast<double>(norm_elems))) + table_bytes;
    m.embd_bytes = e->tied ? 0 : table_bytes;
    m.n_params += norm_elems + vocab_elems * (e->tied ? 1 : 2);
    if (e->family == "opt") {
        // Learned positions: n_ctx_train + 2 rows (OPT's offset of 2).
        const int64_t pos = (int64_t{e->n_ctx_train} + 2) * e->n_embd;
        m.other_bytes = static_cast<uint64_t>(type_bytes(DType::F16, static_cast<double>(pos)));
        m.n_params += pos;
    }
    return m;
}

}  // namespace strata::planner
