#pragma once
// An architecture's layer, described once: its attention block and its feed-forward block as
// steps over the pass's named activations, built from the feature table (models/arch.h, read
// into models::Hparams) and the layer's weights. Every backend runs the same steps: the CPU
// backend (cpu/cpu_steps.cpp) runs each run of row-wise steps as one parallel loop over the
// pass's rows, so a layer keeps its fused loops; the device backend (device/device_steps.cpp)
// issues each step as gpu::Device ops. A new architecture adds its variant here (a step, a
// field of a step) and the kernel each backend runs it with.
#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "cpu/norm_rope_act.h"
#include "models/hparams.h"
#include "runtime/weights/model_weights.h"

namespace strata::runtime {

// A pass's activations: one row per token of the pass, of act_width floats.
enum class Act : uint8_t { X, XN, Q, K, V, Attn, Gate, Up, Out, QLowRank, QLatent, AttnLatent };
inline constexpr size_t kNumActs = 12;
// Floats per row of `a`: the residual stream (X, XN, Out), the query heads (Q), keys and values
// (K, V; MLA: K is the cache row, latent then RoPE part, and V is unused), attention's output
// heads (Attn), the feed-forward's hidden layer (Gate, Up); MLA's low-rank query (QLowRank), its
// query heads absorbed into the latent space (QLatent: each head's latent query then its RoPE
// part) and attention's output in the latent space (AttnLatent); 0 where the model has none.
int64_t act_width(const models::Hparams& hp, Act a);

enum class Op : uint8_t {
    // Row-wise: row t of what a step writes depends on row t of what it reads alone.
    Norm,      // dst = rms_norm(src) * w over the first w.n_cols values of a row (the whole row but
               // for MLA's latent, normed inside its cache row)
    HeadNorm,  // each of dst's n_heads heads: rms_norm(head) * w (QK-norm)
    Bias,      // dst += w
    Rope,      // dst's n_heads heads rotated at the row's position (LayerProgram::rope), each from
               // its value `offset` on (MLA rotates the last qk_rope values of a head)
    StoreKv,   // K and V rows into the layer's KV cache (and XN, where the layer rebuilds its KV);
               // MLA: the K row alone, its latent the values too
    Glu,       // dst (the gate) = act(dst) * src (the up projection; SiluClamped: Hparams' swiglu_*)
    Add,       // dst += src (the residual)
    // Over the whole pass.
    Matmul,      // products[i].dst = src W_i^T, each product from the same input
    HeadMatmul,  // each of n_heads heads: dst's head = src's head's first w.n_cols values times the
                 // head's own matrix of w (n_mats = n_heads), then the src head's other values as
                 // they are (MLA's absorbed query and its values out of the latent space)
    Attend,      // dst = attention of the queries in src over the layer's KV cache, times w^T (the
                 // output projection) where w is set
    Experts,     // dst = the layer's mixture of experts of src
};
bool row_wise(Op op);

// One product of a Matmul: its weight and where it goes.
struct Product {
    LayerWeights::Member w = nullptr;
    Act dst = Act::X;
};

struct Step {
    Op op = Op::Add;
    Act dst = Act::X, src = Act::X;
    LayerWeights::Member w = nullptr;  // Norm, HeadNorm, Bias, HeadMatmul: the weight; Attend: the output projection
    static constexpr size_t kMaxProducts = 3;
    std::array<Product, kMaxProducts> products{};  // Matmul
    int32_t n_products = 0;
    int32_t n_heads = 0;               // HeadNorm, Rope, HeadMatmul
    int32_t offset = 0;                // Rope: where head 0's rotated values start in a row
    models::FfnAct act = models::FfnAct::Silu;  // Glu

    std::span<const Product> matmul() const { return {products.data(), static_cast<size_t>(n_products)}; }
};

// The tensors outside the layers that RoPE reads: ModelWeights' rope_freqs (llama3), or
// phi3's LongRoPE factors for long and short contexts.
enum class RopeFactors : uint8_t { None, Freqs, Long, Short };

// A layer's RoPE: the CPU kernel's parameters but for its frequency factors, which each backend
// takes from its own copy of the tensor `factors` names, and its head size, which is each Rope
// step's (its activation's width over its heads).
struct RopeSpec {
    cpu::RopeParams params;  // freq_factors and head_dim unset
    RopeFactors factors = RopeFactors::None;
};

struct AttentionSpec {
    int32_t n_head = 0, n_head_kv = 0, head_dim = 0;
    int32_t v_head_dim = 0;  // of a value head, when narrower than a key head (MLA: the latent; 0: head_dim)
    bool values_in_keys = false;  // MLA: a head's values are the first v_head_dim values of its key row
    int32_t window = 0;    // a sliding window: the query at p sees keys p - window + 1 .. p (0: all)
    float scale = 0.0f;    // of the scores; 0: 1/sqrt(head_dim)
    float softcap = 0.0f;  // scores s -> softcap * tanh(s / softcap) when > 0
    // Attention sinks (gpt-oss): the layer's tensor of one logit per head, which each backend
    // takes from its own copy of the layer; null: none.
    LayerWeights::Member sinks = nullptr;

    int32_t v_dim() const { return v_head_dim > 0 ? v_head_dim : head_dim; }
};

// What a program's steps run over: the activations' rows and, per row, its position and KV
// slot (host arrays on the CPU, device arrays on a device).
template <class Pos>
struct StepRows {
    std::array<float*, kNumActs> act{};
    int64_t n = 0, n_long = 0;  // rows, of which the first n_long belong to long segments
    const Pos* pos = nullptr;
    const int32_t* block = nullptr;
    const int32_t* row = nullptr;
    bool save_inputs = true;  // StoreKv also keeps XN where the layer rebuilds its KV
};

struct LayerProgram {
    int il = 0;
    RopeSpec rope;
    AttentionSpec attention_spec;
    std::vector<Step> attention;     // X += the attention block of X
    std::vector<Step> feed_forward;  // X += the feed-forward block of X
    // The steps of `attention` that make the keys and values it stores (its K and V products,
    // the row-wise steps on them, StoreKv): what a KV rebuild runs again on saved inputs (XN).
    std::vector<Step> key_value;
};

// Every layer's program for a KV cache of n_ctx positions (phi3 takes its long RoPE factors
// past its original context).
std::vector<LayerProgram> layer_programs(const models::Hparams& hp, const ModelWeights& w, int64_t n_ctx);

// The pass's input rows: each token's embedding (times the architecture's scale), n_embd floats each.
void embed_rows(const models::Hparams& hp, const ModelWeights& w, std::span<const int32_t> tokens, float* x);

}  // namespace strata::runtime
