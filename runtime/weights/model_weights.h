#pragma once
// Views of a llama-family model's weight tensors in the mapped GGUF data section, checked
// against the hyperparameters (names, shapes, supported types) before any compute.
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "cpu/matmul.h"
#include "models/hparams.h"

namespace strata::models { class GgufFile; struct TensorInfo; }

namespace strata::runtime {

// A 2-D weight [n_rows x n_cols] (n_cols contiguous) or a 1-D vector (n_rows == 1).
struct WeightRef {
    const models::TensorInfo* info = nullptr;
    const void* data = nullptr;
    DType type = DType::F32;
    int64_t n_cols = 0;
    int64_t n_rows = 0;
    bool tiled = false;  // rewritten in place by cpu::tile_weights (WeightStore::tile_for_cpu)

    explicit operator bool() const { return data != nullptr; }
    const float* f32() const { return static_cast<const float*>(data); }
};

// y = x W^T for cpu::matmul / cpu::matmul_many.
inline cpu::MatmulOut matmul_out(const WeightRef& w, float* y) { return {w.type, w.data, w.n_rows, y, w.tiled}; }

// Row `row` of a 2-D weight as n_cols floats (token embeddings), in its file layout or tiled.
void dequantize_weight_row(const WeightRef& w, int64_t row, float* dst);

struct LayerWeights {
    WeightRef attn_norm, wq, wk, wv, wo;
    WeightRef bq, bk, bv;  // qwen2 only
    WeightRef ffn_norm, ffn_gate, ffn_up, ffn_down;
};

struct ModelWeights {
    WeightRef tok_embd;      // [n_vocab x n_embd]
    WeightRef output_norm;
    WeightRef output;        // tok_embd when the model ties them
    WeightRef rope_freqs;    // optional llama3 frequency factors
    std::vector<LayerWeights> layers;

    // Throws FormatError naming the missing or mis-shaped tensor.
    static ModelWeights bind(const models::GgufFile& f, const models::Hparams& hp);
    uint64_t total_bytes() const;
    // Bytes one single-token pass reads: every layer and the output head; of an untied
    // embedding table only one row (left out).
    uint64_t decode_bytes() const;
};

}  // namespace strata::runtime
