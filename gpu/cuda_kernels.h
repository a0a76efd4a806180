#pragma once
// The CUDA kernels of one transformer block, as plain C++ calls on device pointers (from
// DevicePool), queued on a CudaStream and returning at once; the CUDA device (cuda_device.cpp)
// calls them. No CUDA headers needed. Activations are float32; weights stay in their GGUF type,
// the KV cache in its own. Each call throws BackendError on a launch error or an unsupported
// type; errors inside a kernel surface at CudaStream::synchronize().
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "core/dtype.h"
#include "core/kernel_shapes.h"
#include "gpu/cuda_stream.h"
#include "gpu/kernels/decode_splits.h"

namespace strata::gpu {

// ---- weights ----
// Weight types the matmul kernels read: F32, F16, BF16 and every block type the CPU has (Q4_0,
// Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ4_XS).
bool gpu_weight_type(DType t);

// y[t * ldy + r] = dot(weight row r, f(x row t)) (added to y with `accumulate`) for t < n_tok,
// r < n_rows, f the input's transform. Weight rows are row_bytes(type, n_cols) apart, x rows
// n_cols floats.
struct WeightMatmul {
    DType type = DType::F32;
    const void* w = nullptr;
    const float* x = nullptr;
    float* y = nullptr;
    int64_t n_rows = 0, n_cols = 0, n_tok = 0;
    int64_t ldy = 0;
    bool accumulate = false;
    bool two_level_acts = true;  // Q8x2 activations; false: single-level int8 (--int8-acts)
    InputTransform in;
};
// Rows a decode matmul (matvec) takes at most; longer products go through matmul_tiles or cuBLAS.
inline constexpr int64_t kMatvecRows = kDeviceRowWiseRows;
// From this many rows a product of block weights expands its weight rows to half precision, a
// chunk at a time, and multiplies them through cuBLAS (llama.cpp's path for long prompts
// without its MMQ kernels): the expansion reads and writes each weight a few bytes once, where
// matmul_tiles dequantizes each weight again for every 64 activation rows.
inline constexpr int64_t kExpandRows = 64;
// The most device bytes a chunk of expanded weight rows takes (at least kExpandRowTile rows).
inline constexpr uint64_t kExpandBytes = uint64_t{32} << 20;
inline constexpr int64_t kExpandRowTile = 128;
// Weight rows expanded at a time for a product of n_rows x n_cols block weights.
int64_t expand_chunk_rows(int64_t n_rows, int64_t n_cols);

class Cublas;
// The product's kernel by type and row count: matvec for up to kMatvecRows rows, matmul_tiles
// for longer products of block types up to kExpandRows, cuBLAS over expanded weight rows past
// that and for longer products of float weights; and the input form that kernel reads.
InputFormat input_format(const WeightMatmul& m);
uint64_t input_bytes(InputFormat format, int64_t n_tok, int64_t n_cols);
// The scratch a product reads: its prepared input, then (expanded products) the weight chunk.
uint64_t product_scratch_bytes(const WeightMatmul& m);
// The most scratch any product of up to max_rows rows of max_cols columns needs.
uint64_t max_product_scratch_bytes(int64_t max_rows, int64_t max_cols);
// x's rows transformed and written in `format` to `out` (input_bytes of them).
void prepare_input(const float* x, const InputTransform& tf, int64_t n_tok, int64_t n_cols, InputFormat format, void* out,
                   CudaStream& s);
// The products from an input prepare_input wrote in input_format(ms[0]) (ignored when Direct):
// one weight's, or those of a few (launch_products, device.h: decode products of one type and
// input) in one launch. `blas` is asked for the cuBLAS handle only when a product goes through
// cuBLAS.
void matmul(std::span<const WeightMatmul> ms, const void* prepared, const std::function<Cublas&()>& blas, CudaStream& s);

// The pieces, for the tests. Activations in the CPU's Q8x2 layout (cpu/quant_ref.h), rows
// quantized_acts_bytes(1, n_cols) apart: byte for byte what cpu::quantize_act_ref writes.
uint64_t quantized_acts_bytes(int64_t n_tok, int64_t n_cols);
void quantize_acts(const float* x, int64_t n_tok, int64_t n_cols, bool two_level, void* out, CudaStream& s);
// n_tok <= kMatvecRows; `acts` from quantize_acts (float weights read x and ignore it). Several
// weights of one type and width over the same input run as one launch, each row's bits as alone.
void matvec(std::span<const WeightMatmul> ms, const void* acts, CudaStream& s);
// Block types, any row count; `x16` holds m.x in half precision (convert_f32_to_f16).
void matmul_tiles(const WeightMatmul& m, const void* x16, CudaStream& s);
// Rows of block weights (from w, row_bytes(type, n_cols) apart) to half precision, n_cols
// values a row in `out`, each rounded to nearest from the block's float value.
void dequantize_rows_f16(DType type, const void* w, int64_t n_rows, int64_t n_cols, uint16_t* out, CudaStream& s);
// A copy of whole 16-byte words from page-locked host memory that the device maps
// (host_mapped, cuda_host.h) by a kernel on `s` rather than a copy engine; both pointers
// 16-byte aligned, bytes a multiple of 16.
void copy_mapped_h2d(void* dst, const void* src, size_t bytes, CudaStream& s);
inline constexpr size_t kMappedCopyBytes = size_t{64} << 10;  // copies up to this size take that path
// n floats to half precision or bfloat16 (round to nearest even).
void convert_f32_to_f16(const float* x, uint16_t* out, int64_t n, CudaStream& s);
void convert_f32_to_bf16(const float* x, uint16_t* out, int64_t n, CudaStream& s);

// cuBLAS for the long products of float weights. One handle per device.
class Cublas {
public:
    Cublas();  // throws BackendError
    ~Cublas();
    Cublas(const Cublas&) = delete;
    Cublas& operator=(const Cublas&) = delete;

    // y[t * ldy + r] (+)= sum_k w[r][k] * x[t][k]: w is n_rows x n_cols and x n_tok x n_cols,
    // row-major, both of `type` (F32, F16 or BF16); y float32. Float accumulation.
    void gemm(DType type, const void* w, const void* x, float* y, int64_t ldy, int64_t n_rows, int64_t n_cols,
              int64_t n_tok, bool accumulate, CudaStream& s);

private:
    void* handle_ = nullptr;  // cublasHandle_t
};

// Device::head_matmul (kernels/head_matvec.cu): a warp a product row, the weights decoded with
// the block's values8 and the input read as floats, summed in float.
void head_matmul(const HeadMatmulArgs& a, CudaStream& s);

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
// KV element types the kernels read and write: F32, F16, BF16, Q8_0, Q4_0 (cpu/kv_format.h).
bool gpu_kv_type(DType t);
// Writes n_tok rows of n floats (src, row-major) into the cache in its type (cpu::store_kv_row's
// bytes): row t goes to row r.row[t] of block r.block[t].
void kv_store(const float* src, const KvRows& r, CudaStream& s);
void rope_qkv_store(const QkvStoreArgs& a, CudaStream& s);
// The inverse: n_tok rows of n floats read from the cache into dst.
void kv_gather(const KvRows& r, float* dst, CudaStream& s);

// The decode kernel's splits write their partial outputs into scratch of at most this many bytes
// (for one row at least): a call of more rows than it holds runs in groups of rows, one after
// another on the stream, so that a long context's scratch does not take the room of layers.
inline constexpr size_t kAttentionScratchBytes = size_t{64} << 20;
// Floats of scratch one row of the decode kernel takes for these sizes.
inline size_t attention_row_scratch_floats(int32_t n_head, int32_t head_dim, int32_t max_blocks) {
    const auto splits = static_cast<size_t>(blocks::decode_grid_splits(max_blocks));
    return static_cast<size_t>(n_head) * splits * static_cast<size_t>(head_dim + 2);
}
// Rows the decode kernel takes at once for these sizes.
inline int64_t attention_rows_per_launch(int32_t n_head, int32_t head_dim, int32_t max_blocks) {
    const size_t row = sizeof(float) * attention_row_scratch_floats(n_head, head_dim, max_blocks);
    return row == 0 ? 1 : std::max<int64_t>(1, static_cast<int64_t>(kAttentionScratchBytes / row));
}
// Floats of scratch attention needs for calls of up to n_seq rows.
inline size_t attention_scratch_floats(int32_t n_seq, int32_t n_head, int32_t head_dim, int32_t max_blocks) {
    const int64_t rows = std::min<int64_t>(n_seq, attention_rows_per_launch(n_head, head_dim, max_blocks));
    return static_cast<size_t>(rows) * attention_row_scratch_floats(n_head, head_dim, max_blocks);
}
// softmax(q k^T * scale) v per query row and head over its n_kv keys (Device::decode_attention):
// rows in a.runs run as tiled prefill on the tensor cores where the head size allows, every other
// row as flash-decoding split over KV blocks, all query heads of a KV head in one thread block.
void attention(const DecodeAttentionArgs& a, CudaStream& s);

}  // namespace strata::gpu
