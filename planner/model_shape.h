#pragma once
// What the planner needs to know about a model, without its weights: bytes and matmul
// parameters per layer, the embedding and output tensors, and the attention geometry that
// sizes the KV cache. Read from a GGUF header (tensor table only) or built from a catalog
// name plus weight and KV types.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace strata::models { class GgufFile; }

namespace strata::planner {

struct LayerShape {
    uint64_t weight_bytes = 0;     // every tensor of the block (norms and biases included)
    int64_t n_params = 0;
    int64_t n_matmul_params = 0;   // elements of the 2-D weights: 2 flops each per token
    uint64_t expert_bytes = 0;     // of weight_bytes: the routed experts' matrices (ffn_*_exps)
    int64_t n_expert_params = 0;   // of n_matmul_params: theirs
    int64_t n_attn_params = 0;     // of n_matmul_params: attention's matrices (attn_*)
    uint64_t router_bytes = 0;     // of weight_bytes: a mixture's router (ffn_gate_inp), which chooses the experts
    // A device's decode launches beyond one for q/k/v and one for gate/up: a group's products
    // launch together only where their weights share a type (Device::matmul_group), so a Q4_K_M
    // layer whose attn_v is Q6_K takes one more.
    int32_t extra_decode_launches = 0;
    // A device's ops beyond its matmuls and the two every layer makes (RoPE with the K/V stores,
    // and attention), in decode and prefill alike: a bias add for each of q, k, v and the output
    // wherever the file has them (qwen2, gpt-oss), a head norm of q and of k (qwen3, gemma3),
    // gemma's post-norms, the residual add that a bias or post-norm after a product keeps from
    // accumulating into it, and a dense layer's GeGLU or clamped SwiGLU, which the down projection
    // does not take in as it takes SwiGLU;
    // a mixture of experts' feed-forward input norm and residual add (its experts' own ops are
    // device_expert_ops); MLA's RoPE apart from the K store, its latent normed in place (three
    // ops), its per-head products with the copy of the queries' RoPE part, and its low-rank queries' product.
    int32_t extra_device_ops = 0;
    // A device's ops for each routed expert held there that a pass runs (DeviceExperts::start):
    // its gate/up products (a launch a type), SwiGLU, down, and a bias add for each of the three
    // the file has (gpt-oss); 0 in a dense layer. Its rows' copies up and down, on the copy streams,
    // are not counted here (CostModel::hybrid_layer prices them beside these).
    int32_t device_expert_ops = 0;
    // A device's ops for each chunk of up to kPassRows positions whose K and V the layer
    // recomputes from saved hidden states (DeviceBackend's rebuild_kv): the saved rows gathered,
    // K and V's products (a launch each: a chunk of more than 16 rows launches every product
    // apart; one of at most 16 groups them where they share a type, an op fewer, not counted),
    // their biases and K's head norm where the file has them, and RoPE with the store (MLA: the
    // latent's product, its norm in place, its RoPE apart and the store).
    int32_t rebuild_ops = 0;
    bool operator==(const LayerShape&) const = default;
};

struct ModelShape {
    std::string name;
    std::string family;  // llama, qwen2, mistral, opt
    std::string source;  // the GGUF path, or "catalog"
    int32_t n_layer = 0, n_embd = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_ff = 0, n_vocab = 0, n_ctx_train = 0;
    DType weight_type = DType::F16;  // the type holding most matmul bytes
    DType kv_type = DType::F16;
    std::vector<LayerShape> layers;
    uint64_t embd_bytes = 0;    // token embedding table, looked up (0 when tied: then in output_bytes)
    uint64_t output_bytes = 0;  // what the logits matmul reads: output norm + output matrix
    int64_t output_matmul_params = 0;
    bool tied_output = false;   // the output matrix is the embedding table
    uint64_t other_bytes = 0;   // anything else (rope factors, positional embeddings)
    int64_t n_params = 0;
    int32_t n_expert = 0, n_expert_used = 0;  // a mixture of experts: each token uses n_expert_used of n_expert
    // Multi-head latent attention (deepseek2): a token's K and V in a layer are one cached row of
    // kv_latent values (the latent and the RoPE part), attended by every query head as one KV head
    // (n_head_kv 1, head_dim kv_latent: the absorbed form); 0: K and V of n_head_kv heads.
    int32_t kv_latent = 0;
    // Sliding windows (gpt-oss): n_layer_swa of the layers attend to at most the last n_swa
    // positions (their caches still hold every position: the paged cache's blocks serve every layer).
    int32_t n_swa = 0, n_layer_swa = 0;

    int32_t n_embd_kv() const { return n_head_kv * head_dim; }
    double mean_extra_decode_launches() const { return mean_per_layer(&LayerShape::extra_decode_launches); }
    // A layer's device ops besides its matmuls (runtime/exec/device/device_steps.cpp): the op that
    // rotates q and k and, with the KV cache on the device, stores K and V (Device::rope_qkv_store),
    // attention, and the layer's extra_device_ops; the model's mean.
    double device_other_ops() const { return 2 + mean_per_layer(&LayerShape::extra_device_ops); }
    // A layer's device ops in a decode step: q/k/v, the output and a dense layer's gate/up and down
    // (and a launch a type more where a group mixes types), and its other ops.
    static int32_t device_decode_ops(const LayerShape& l) {
        return (l.n_expert_params > 0 ? 2 : 4) + l.extra_decode_launches + 2 + l.extra_device_ops;
    }
    // The device backend's rows a pass (Backend::kMaxUbatch): a prompt's passes, and the chunks
    // of a K/V rebuild.
    static constexpr double kPassRows = 256;
    // A layer whose K and V are recomputed rebuilds, in each pass, the positions before the pass
    // that its sequences attend to, kPassRows at a time, and stores the pass's inputs: an op, and
    // one more for their norm, which then no longer goes into the matmul.
    static constexpr int32_t kRecomputePassOps = 2;
    double mean_per_layer(int32_t LayerShape::*count) const;
    uint64_t total_weight_bytes() const;
    // K and V of one token in one layer, in kv_type (MLA: its one latent row).
    double kv_bytes_per_token() const { return kv_bytes_per_token(kv_type); }
    double kv_bytes_per_token(DType type) const;
    // The positions a layer's attention reads for `context` positions, averaged over the layers
    // (window layers read at most their window).
    double attended_positions(double context) const;
    // The activations a prefill of `rows` prompt rows holds at once, in passes of at most
    // kPassRows (residual, q/k/v, FFN intermediates), and the logits of `sequences` rows.
    double prefill_working_set_bytes(double rows, double sequences) const;
    // The saved hidden state of one token in one layer (F16), from which K and V can be recomputed.
    double act_bytes_per_token() const { return 2.0 * n_embd; }
    // Flops to recompute one token's K and V (MLA: its latent row) in one layer from its hidden state.
    double recompute_flops_per_token() const { return 2.0 * n_embd * (kv_latent > 0 ? kv_latent : 2.0 * n_embd_kv()); }
    // Attention flops for one query token against one cached position (QK^T and AV).
    double attention_flops_per_position() const { return 4.0 * n_head * head_dim; }

    // Of a layer, the bytes a pass of `tokens` tokens reads (every dense tensor, and the expected
    // share of the experts they choose, routing taken as uniform) and the matmul parameters one
    // token multiplies.
    double read_bytes(const LayerShape& l, double tokens) const;
    double active_matmul_params(const LayerShape& l) const;

    // Reads the header and tensor table only. Throws FormatError/IoError.
    static ModelShape from_gguf(const std::filesystem::path& path);
    // The same from a file already open (the runtime's).
    static ModelShape from_gguf(const models::GgufFile& f);
    // The model cut to its first n layers (an early-exit drafter's engine), n <= n_layer.
    ModelShape first_layers(int32_t n) const;
    // A catalog model with every matrix in `weight_type` (the routed experts in the model's own
    // type where it has one: gpt-oss's MXFP4), norms and biases in F32.
    // Throws UsageError (listing the known names) for an unknown name.
    static ModelShape from_catalog(std::string_view name, DType weight_type, DType kv_type = DType::F16);
    // The same with the weight type by name: a GGUF type, "Q4_K_M" (llama.cpp's mix: Q4_K, with
    // ffn_down in Q6_K on the layers its recipe gives more bits and the output in Q6_K), or empty
    // for the model's usual types (the catalog's weight_type, else F16). Throws UsageError for
    // another name.
    static ModelShape from_catalog(std::string_view name, std::string_view weight_type, DType kv_type = DType::F16);
    bool operator==(const ModelShape&) const = default;
};

// Bytes of n elements of type t (fractional blocks allowed: planning, not allocation).
double type_bytes(DType t, double n_elements);

}  // namespace strata::planner
