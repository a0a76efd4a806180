#include "planner/model_shape.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include <fmt/format.h>

#include "core/error.h"
#include "models/arch.h"
#include "models/gguf_file.h"
#include "models/hparams.h"
#include "planner/catalog.h"
#include "planner/layer_device_ops.h"

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

double ModelShape::kv_bytes_per_token(DType type) const {
    return kv_latent > 0 ? type_bytes(type, kv_latent) : 2.0 * type_bytes(type, n_embd_kv());
}

double ModelShape::prefill_working_set_bytes(double rows, double sequences) const {
    return std::min(rows, kPassRows) * (4.0 * n_embd + 3.0 * n_ff) * 2.0 + sequences * n_vocab * 4.0;
}

double ModelShape::attended_positions(double context) const {
    if (n_layer_swa == 0 || n_swa <= 0) return context;
    const double windowed = std::min(context, static_cast<double>(n_swa));
    return ((n_layer - n_layer_swa) * context + n_layer_swa * windowed) / n_layer;
}

ModelShape ModelShape::from_gguf(const std::filesystem::path& path) {
    return from_gguf(models::GgufFile::open(path, /*map_data=*/false));
}

ModelShape ModelShape::first_layers(int32_t n) const {
    ModelShape s = *this;
    if (n >= n_layer) return s;
    for (int32_t il = n; il < n_layer; ++il) s.n_params -= layers[size_t(il)].n_params;
    s.layers.resize(size_t(n));
    s.n_layer = n;
    s.n_layer_swa = std::min(n_layer_swa, n);
    return s;
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
    if (hp.mla.enabled()) m.kv_latent = m.head_dim = hp.mla.cache_width();
    // gpt-oss's window layers attend to their window's positions alone.
    if (hp.arch == models::Arch::GptOss) {
        m.n_swa = hp.n_swa;
        m.n_layer_swa = static_cast<int32_t>(std::count(hp.swa_layers.begin(), hp.swa_layers.end(), true));
    }
    m.layers.resize(static_cast<size_t>(hp.n_layer));

    std::map<DType, uint64_t> matmul_bytes_by_type;
    std::vector<LayerOpTensors> op_tensors(m.layers.size());
    const models::TensorInfo* token_embd = nullptr;
    const models::TensorInfo* output = nullptr;
    for (const auto& t : f.tensors()) {
        m.n_params += t.nelements();
        int layer = -1, used = 0;
        if (std::sscanf(t.name.c_str(), "blk.%d.%n", &layer, &used) == 1 && used > 0) {
            if (layer < 0 || layer >= hp.n_layer)
                throw FormatError(fmt::format("tensor '{}' names layer {} of a {}-layer model", t.name, layer, hp.n_layer),
                                  "the file's tensors and its block_count disagree: download or convert it again");
            auto& l = m.layers[static_cast<size_t>(layer)];
            l.weight_bytes += t.nbytes;
            l.n_params += t.nelements();
            const std::string_view rest = std::string_view(t.name).substr(static_cast<size_t>(used));
            op_tensors[size_t(layer)].add(rest, t.type);
            if (rest.starts_with("ffn_gate_inp.")) l.router_bytes += t.nbytes;
            // Matrices (2-D and 3-D weights; gpt-oss's 2-D expert biases are none). Routed experts
            // are the ffn_*_exps matrices (MLA's per-head k_b / v_b are 3-D too).
            if (t.n_dims < 2 || !rest.ends_with(".weight")) continue;
            l.n_matmul_params += t.nelements(), matmul_bytes_by_type[t.type] += t.nbytes;
            if (rest.find("_exps.") != std::string_view::npos) l.n_expert_params += t.nelements(), l.expert_bytes += t.nbytes;
            if (rest.rfind("attn_", 0) == 0) l.n_attn_params += t.nelements();
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
    for (size_t il = 0; il < m.layers.size(); ++il)
        count_device_ops(m.layers[il], op_tensors[il], &models::arch_traits(hp.arch), !hp.moe.in_layer(int(il)));
    uint64_t best = 0;
    for (auto [t, b] : matmul_bytes_by_type)
        if (b > best) best = b, m.weight_type = t;
    return m;
}

double ModelShape::mean_per_layer(int32_t LayerShape::*count) const {
    if (layers.empty()) return 0;
    double n = 0;
    for (const LayerShape& l : layers) n += l.*count;
    return n / static_cast<double>(layers.size());
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

}  // namespace strata::planner
