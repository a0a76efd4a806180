#include "planner/layer_device_ops.h"

#include <algorithm>

#include "models/arch.h"

namespace strata::planner {

namespace {

enum : size_t { kKBias = 1, kVBias = 2, kOutBias = 3, kQNorm = 4, kKNorm = 5, kAttnPostNorm = 6, kFfnPostNorm = 7 };
constexpr std::array<std::string_view, 5> kQkv = {"attn_q.weight", "attn_q_a.weight", "attn_k.weight", "attn_v.weight",
                                                  "attn_kv_a_mqa.weight"};
constexpr std::array<std::string_view, 2> kGateUp = {"ffn_gate.weight", "ffn_up.weight"};
constexpr std::array<std::string_view, 2> kExpertGateUp = {"ffn_gate_exps.weight", "ffn_up_exps.weight"};
constexpr std::array<std::string_view, 3> kExpertBiases = {"ffn_gate_exps.bias", "ffn_up_exps.bias", "ffn_down_exps.bias"};

template <size_t N>
std::optional<size_t> index_of(const std::array<std::string_view, N>& names, std::string_view name) {
    const auto it = std::find(names.begin(), names.end(), name);
    return it == names.end() ? std::nullopt : std::optional<size_t>(size_t(it - names.begin()));
}

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

// LayerShape::extra_device_ops from the layer's kOwnOpTensors (runtime/exec/layer_program.cpp,
// as runtime/exec/device/device_steps.cpp issues it).
int32_t extra_device_ops(std::bitset<kOwnOpTensors.size()> own, const models::ArchTraits& arch, bool dense, bool low_rank_q) {
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

void LayerOpTensors::add(std::string_view name, DType type) {
    if (const auto i = index_of(kOwnOpTensors, name)) own.set(*i);
    if (const auto i = index_of(kQkv, name)) qkv[*i] = type;
    if (const auto i = index_of(kGateUp, name)) gate_up[*i] = type;
    if (const auto i = index_of(kExpertGateUp, name)) expert_gate_up[*i] = type;
    if (index_of(kExpertBiases, name)) ++expert_biases;
}

void count_device_ops(LayerShape& l, const LayerOpTensors& t, const models::ArchTraits* arch, bool dense) {
    l.extra_decode_launches = extra_launches(t.qkv) + extra_launches(t.gate_up);
    if (!arch) return;
    l.extra_device_ops = extra_device_ops(t.own, *arch, dense, t.qkv[1].has_value());
    // DeviceExperts::start: the gate/up products, SwiGLU and down, and each bias the file has.
    l.device_expert_ops = dense ? 0 : 3 + extra_launches(t.expert_gate_up) + t.expert_biases;
    // rebuild_kv: the gather, then the layer program's key/value steps (runtime/exec/layer_program.cpp).
    l.rebuild_ops = arch->mla ? 1 + 1 + 3 + 1 + 1
                              : 1 + 2 + t.own[kKBias] + t.own[kVBias] + (arch->qk_norm && t.own[kKNorm]) + 1;
}

}  // namespace strata::planner
