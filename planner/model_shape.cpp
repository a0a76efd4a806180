#include "planner/model_shape.h"

#include <algorithm>
#include <array>
#include <bitset>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "core/error.h"
#include "models/arch.h"
#include "models/gguf_file.h"
#include "models/hparams.h"
#include "planner/catalog.h"

namespace strata::planner {

namespace {

// Launches beyond one for a group of products (absent ones left out): Device::matmul_group
// launches a run of products of one type together, a new launch where the type changes.
template <size_t N>
int32_t extra_launches(const std::array<std::optional<DType>, N>& types) {
    int32_t runs = 0;
    std::optional<DType> last;
    for (const auto& t : types) {
        if (!t) continue;
        if (!last || *t != *last) ++runs;
        last = t;
    }
    return std::max(runs, 1) - 1;
}

// Tensors that give a layer's device step an op of its own: bias adds, head norms and gemma's
// post-norms (gpt-oss's post_attention_norm is its feed-forward's input norm, which the matmuls
// take in).
constexpr std::array<std::string_view, 8> kOwnOp = {"attn_q.bias",        "attn_k.bias",        "attn_v.bias",
                                                    "attn_output.bias",   "attn_q_norm.weight", "attn_k_norm.weight",
                                                    "post_attention_norm.weight", "post_ffw_norm.weight"};
enum : size_t { kOutBias = 3, kQNorm = 4, kKNorm = 5, kAttnPostNorm = 6, kFfnPostNorm = 7 };

// LayerShape::extra_device_ops from the layer's kOwnOp tensors (runtime/exec/layer_program.cpp,
// as runtime/exec/device/device_steps.cpp issues it).
int32_t extra_device_ops(std::bitset<kOwnOp.size()> own, const models::ArchTraits& arch, bool dense, bool low_rank_q) {
    // Tensors the architecture's runtime does not read (models/arch.h's traits) make no op.
    if (!arch.post_norms) own.reset(kAttnPostNorm).reset(kFfnPostNorm);
    if (!arch.qk_norm) own.reset(kQNorm).reset(kKNorm);
    // A bias or post-norm between a product and its residual add leaves the add an op of its own.
    const bool attn_add_apart = own[kOutBias] || own[kAttnPostNorm];
    const bool glu_apart = dense && arch.ffn_act != models::FfnAct::Silu;
    const int32_t experts = dense ? 0 : 2;
    const int32_t mla = arch.mla ? 2 + 3 + 3 + low_rank_q : 0;
    return static_cast<int32_t>(own.count()) + attn_add_apart + own[kFfnPostNorm] + glu_apart + experts + mla;
}

}  // namespace

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
    // Per layer, the types of the matrices a decode step launches as one group, in the group's
    // order (runtime/exec/layer_program.cpp): q/k/v (MLA: q or its low rank, and the latent), and gate/up.
    constexpr std::array<std::string_view, 5> kQkv = {"attn_q.weight", "attn_q_a.weight", "attn_k.weight", "attn_v.weight",
                                                      "attn_kv_a_mqa.weight"};
    constexpr std::array<std::string_view, 2> kGateUp = {"ffn_gate.weight", "ffn_up.weight"};
    std::vector<std::array<std::optional<DType>, 5>> qkv_types(m.layers.size());
    std::vector<std::array<std::optional<DType>, 2>> gate_up_types(m.layers.size());
    std::vector<std::bitset<kOwnOp.size()>> own_ops(m.layers.size());
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
            if (const auto it = std::find(kOwnOp.begin(), kOwnOp.end(), rest); it != kOwnOp.end())
                own_ops[size_t(layer)].set(size_t(it - kOwnOp.begin()));
            // Matrices (2-D and 3-D weights; gpt-oss's 2-D expert biases are none). Routed experts
            // are the ffn_*_exps matrices (MLA's per-head k_b / v_b are 3-D too).
            if (t.n_dims < 2 || !rest.ends_with(".weight")) continue;
            l.n_matmul_params += t.nelements(), matmul_bytes_by_type[t.type] += t.nbytes;
            if (rest.find("_exps.") != std::string_view::npos) l.n_expert_params += t.nelements(), l.expert_bytes += t.nbytes;
            if (rest.rfind("attn_", 0) == 0) l.n_attn_params += t.nelements();
            if (const auto it = std::find(kQkv.begin(), kQkv.end(), rest); it != kQkv.end())
                qkv_types[size_t(layer)][size_t(it - kQkv.begin())] = t.type;
            if (const auto it = std::find(kGateUp.begin(), kGateUp.end(), rest); it != kGateUp.end())
                gate_up_types[size_t(layer)][size_t(it - kGateUp.begin())] = t.type;
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
    for (size_t il = 0; il < m.layers.size(); ++il) {
        LayerShape& l = m.layers[il];
        l.extra_decode_launches = extra_launches(qkv_types[il]) + extra_launches(gate_up_types[il]);
        l.extra_device_ops = extra_device_ops(own_ops[il], models::arch_traits(hp.arch), !hp.moe.in_layer(int(il)),
                                              qkv_types[il][1].has_value());
    }
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
