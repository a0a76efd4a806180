#pragma once
// The CUDA kernels of one llama block, as plain C++ calls on device pointers (from DevicePool),
// queued on a CudaStream and returning at once; the CUDA device (cuda_device.cpp) calls them. No
// CUDA headers needed. Activations are float32; weights stay in their GGUF type, the KV cache in
// its own (F32, F16 or BF16). Each call throws BackendError on a launch error or an unsupported
// weight type; errors inside a kernel surface at CudaStream::synchronize().
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "gpu/cuda_stream.h"

namespace strata::gpu {

// ---- weights ----
// Weight types the GEMV and the dequantizer read: F16, Q4_0, Q4_1, Q8_0, Q4_K, Q6_K.
bool gpu_weight_type(DType t);

// Decode matmul: y[r] = dot(weight row r, x) for r < n_rows. Weight rows are row_bytes(type,
// n_cols) apart, x holds n_cols floats; the weight values are decoded on the fly.
void gemv(DType type, const void* w, const float* x, float* y, int64_t n_rows, int64_t n_cols, CudaStream& s);

// The weight matrix in half precision, row-major n_rows x n_cols (for gemm_f16).
void dequantize_f16(DType type, const void* w, uint16_t* out, int64_t n_rows, int64_t n_cols, CudaStream& s);
// n floats to half precision (round to nearest even).
void convert_f32_to_f16(const float* x, uint16_t* out, int64_t n, CudaStream& s);

// cuBLAS for the prefill matmul. One handle per stream that uses it.
class Cublas {
public:
    Cublas();  // throws BackendError
    ~Cublas();
    Cublas(const Cublas&) = delete;
    Cublas& operator=(const Cublas&) = delete;

    // y[t][r] = sum_k w[r][k] * x[t][k]: w is n_rows x n_cols and x is n_tok x n_cols, both half
    // precision row-major; y is n_tok x n_rows float32 row-major. Float accumulation.
    void gemm_f16(const uint16_t* w, const uint16_t* x, float* y, int64_t n_rows, int64_t n_cols, int64_t n_tok,
                  CudaStream& s);

private:
    void* handle_ = nullptr;  // cublasHandle_t
};

// ---- per-row and element-wise ----
// y = x / rms(x) * w for n_rows rows of n values (x and y may alias).
void rms_norm(const float* x, const float* w, float* y, int64_t n_rows, int64_t n, float eps, CudaStream& s);

// Rotates, in place, n_tokens rows of n_heads heads; token t is at position pos[t] (device).
void rope(float* x, const int32_t* pos, int64_t n_tokens, const RopeArgs& a, CudaStream& s);

// gate = silu(gate) * up
void swiglu(float* gate, const float* up, int64_t n, CudaStream& s);
// y += x
void add(float* y, const float* x, int64_t n, CudaStream& s);
// gate = gelu(gate) * up, GELU in its tanh approximation (kernels/glu_softcap.cu)
void geglu(float* gate, const float* up, int64_t n, CudaStream& s);
// x = cap * tanh(x / cap) (kernels/glu_softcap.cu)
void softcap(float* x, int64_t n, float cap, CudaStream& s);
// y[t] += b for n_rows rows of n values (a bias)
void add_rows(float* y, const float* b, int64_t n_rows, int64_t n, CudaStream& s);

// ---- the paged KV cache and attention over it ----

// KV element types the kernels read and write: F32, F16, BF16.
bool gpu_kv_type(DType t);
// Writes n_tok rows of n floats (src, row-major) into the cache, converted to `type`: row t goes
// to row row[t] of block block[t] (device arrays), at cache + block * block_stride + row *
// kv_stride elements.
void kv_store(const float* src, void* cache, DType type, const int32_t* block, const int32_t* row, int64_t n_tok,
              int64_t n, int64_t kv_stride, int64_t block_stride, CudaStream& s);

// The inverse: n_tok rows of n floats (dst, row-major) read from row row[t] of block block[t].
void kv_gather(const void* cache, DType type, const int32_t* block, const int32_t* row, int64_t n_tok, int64_t n,
               int64_t kv_stride, int64_t block_stride, float* dst, CudaStream& s);

// The attention kernel's arguments (strides in elements of the cache's type).
struct CudaAttentionArgs {
    const float* q = nullptr;    // n_seq x (n_head * head_dim): one new token per sequence
    float* out = nullptr;        // n_seq x (n_head * head_dim)
    const void* k = nullptr;     // KV cache: position p of a sequence is row p % 16 of block
    const void* v = nullptr;     //   block_table[p / 16], block b at k + b * block_stride elements
    DType kv_type = DType::F32;  // gpu_kv_type
    const int32_t* block_tables = nullptr;  // n_seq x max_blocks (device)
    const int32_t* n_kv = nullptr;          // n_seq key counts (device): the new token's position + 1
    int32_t n_seq = 0;
    int32_t max_blocks = 0;      // block table row length; every n_kv <= 16 * max_blocks
    int32_t n_head = 0;
    int32_t n_head_kv = 0;       // divides n_head (grouped-query attention)
    int32_t head_dim = 0;
    int64_t kv_stride = 0;       // elements between consecutive positions of a block
    int64_t block_stride = 0;    // elements between blocks
    float* scratch = nullptr;    // decode_attention_scratch_floats(...) floats (device)
};
// KV blocks one split of the attention handles; the splits are reduced at the end.
inline constexpr int32_t kAttentionSplitBlocks = 8;
inline size_t decode_attention_scratch_floats(int32_t n_seq, int32_t n_head, int32_t head_dim, int32_t max_blocks) {
    const size_t splits = (static_cast<size_t>(max_blocks) + kAttentionSplitBlocks - 1) / kAttentionSplitBlocks;
    return static_cast<size_t>(n_seq) * n_head * splits * (head_dim + 2);
}
// softmax(q k^T / sqrt(head_dim)) v per sequence and head over its n_kv keys. A prompt's causal
// attention is the same call with one "sequence" per query token, each with the prompt's block
// table and its own key count (position + 1).
void decode_attention(const CudaAttentionArgs& a, CudaStream& s);

}  // namespace strata::gpu
