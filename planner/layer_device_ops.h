#pragma once
// A layer's device ops as the device backend issues them (runtime/exec/device/device_steps.cpp,
// device_experts.cpp), counted from the tensors the layer holds: model_shape.cpp gives them from
// a file's tensor table, catalog_shapes.cpp from what a catalog family's files hold.
#include <array>
#include <bitset>
#include <optional>
#include <string_view>

#include "core/dtype.h"
#include "planner/model_shape.h"

namespace strata::models { struct ArchTraits; }

namespace strata::planner {

// Tensors that give a layer's device step an op of its own: bias adds, head norms and gemma's
// post-norms (gpt-oss's post_attention_norm is its feed-forward's input norm, which the matmuls
// take in).
inline constexpr std::array<std::string_view, 8> kOwnOpTensors = {
    "attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_output.bias", "attn_q_norm.weight", "attn_k_norm.weight",
    "post_attention_norm.weight", "post_ffw_norm.weight"};

// What of a layer's tensors decides its device ops.
struct LayerOpTensors {
    std::bitset<kOwnOpTensors.size()> own;
    // The types of the products a decode step launches as one group, in the group's order
    // (runtime/exec/layer_program.cpp): q/k/v (MLA: q or its low rank, and the latent), the dense
    // gate/up, and a routed expert's gate/up.
    std::array<std::optional<DType>, 5> qkv;
    std::array<std::optional<DType>, 2> gate_up, expert_gate_up;
    int32_t expert_biases = 0;  // of ffn_{gate,up,down}_exps.bias (gpt-oss)

    // Notes one tensor: its name past "blk.N.", and its type.
    void add(std::string_view name, DType type);
};

// Sets l's extra_decode_launches, extra_device_ops, device_expert_ops and rebuild_ops. `arch` null: an
// architecture Strata does not run (catalog shapes of OPT and OLMoE), whose ops are not counted.
void count_device_ops(LayerShape& l, const LayerOpTensors& t, const models::ArchTraits* arch, bool dense);

}  // namespace strata::planner
