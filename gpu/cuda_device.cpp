// The CUDA device behind the device interface: the kernels of cuda_kernels.h on CudaStreams,
// memory from one cudaMalloc of the budget, cuBLAS for prompt-sized matmuls.
#include <fmt/format.h>

#include "core/error.h"
#include "gpu/cuda_kernels.h"
#include "gpu/cuda_stream.h"
#include "gpu/device.h"

namespace strata::gpu {

namespace {

// Elements of `type` in `bytes` (the kernels take strides in elements; KV types here are not
// block-quantized, so a row stride is a whole number of elements).
int64_t elements(DType type, int64_t bytes) { return bytes / static_cast<int64_t>(row_bytes(type, 1)); }

class CudaDevice final : public Device {
public:
    CudaDevice(int index, uint64_t budget)
        : Device(budget, cuda_malloc_pool(index, budget), cuda_free_pool), name_(fmt::format("cuda:{}", index)) {}

    std::string_view name() const override { return name_; }
    std::unique_ptr<Stream> make_stream(std::string_view) override { return std::make_unique<CudaStream>(); }
    std::unique_ptr<Event> make_event() override { return std::make_unique<CudaEvent>(); }
    bool supports_weight(DType t) const override { return gpu_weight_type(t); }
    bool supports_kv(DType t) const override { return gpu_kv_type(t); }
    size_t attention_scratch_floats(int32_t n_seq, int32_t n_head, int32_t head_dim, int32_t max_blocks) const override {
        return decode_attention_scratch_floats(n_seq, n_head, head_dim, max_blocks);
    }
    void reserve_matmul(int64_t weight_elems, int64_t act_elems) override {
        w16_ = memory().allocate(uint64_t(weight_elems) * 2, "half-precision weights for prompt matmuls");
        x16_ = memory().allocate(uint64_t(act_elems) * 2, "half-precision activations");
    }
    uint64_t matmul_scratch_bytes(int64_t weight_elems, int64_t act_elems) const override {
        return 2 * uint64_t(weight_elems + act_elems) + 2 * memory().arena().alignment();
    }

    void copy_h2d(void* dst, const void* src, size_t bytes, Stream& s) override { gpu::copy_h2d(dst, src, bytes, cuda(s)); }
    void copy_d2h(void* dst, const void* src, size_t bytes, Stream& s) override { gpu::copy_d2h(dst, src, bytes, cuda(s)); }
    void copy_d2d(void* dst, const void* src, size_t bytes, Stream& s) override { gpu::copy_d2d(dst, src, bytes, cuda(s)); }

    // Up to kRowWiseRows rows: one GEMV per row, so each row gets the same bits whatever else
    // the call holds. Longer: dequantize to half precision, then cuBLAS.
    void matmul(const MatmulArgs& a, Stream& s) override {
        CudaStream& cs = cuda(s);
        if (a.n_tok <= kRowWiseRows) {
            for (int64_t t = 0; t < a.n_tok; ++t)
                gemv(a.type, a.w, a.x + t * a.n_cols, a.y + t * a.n_rows, a.n_rows, a.n_cols, cs);
            return;
        }
        STRATA_ASSERT(uint64_t(a.n_rows * a.n_cols) * 2 <= w16_.bytes() && uint64_t(a.n_tok * a.n_cols) * 2 <= x16_.bytes());
        dequantize_f16(a.type, a.w, w16_.as<uint16_t>(), a.n_rows, a.n_cols, cs);
        convert_f32_to_f16(a.x, x16_.as<uint16_t>(), a.n_tok * a.n_cols, cs);
        cublas_.gemm_f16(w16_.as<uint16_t>(), x16_.as<uint16_t>(), a.y, a.n_rows, a.n_cols, a.n_tok, cs);
    }
    void rms_norm(const float* x, const float* w, float* y, int64_t n_rows, int64_t n, float eps, Stream& s) override {
        gpu::rms_norm(x, w, y, n_rows, n, eps, cuda(s));
    }
    void rope(float* x, const int32_t* pos, int64_t n_tokens, const RopeArgs& a, Stream& s) override {
        gpu::rope(x, pos, n_tokens, a, cuda(s));
    }
    void swiglu(float* gate, const float* up, int64_t n_rows, int64_t n, Stream& s) override {
        gpu::swiglu(gate, up, n_rows * n, cuda(s));
    }
    void geglu(float* gate, const float* up, int64_t n_rows, int64_t n, Stream& s) override {
        gpu::geglu(gate, up, n_rows * n, cuda(s));
    }
    void softcap(float* x, int64_t n, float cap, Stream& s) override { gpu::softcap(x, n, cap, cuda(s)); }
    void add(float* y, const float* x, int64_t n, Stream& s) override { gpu::add(y, x, n, cuda(s)); }
    void add_rows(float* y, const float* b, int64_t n_rows, int64_t n, Stream& s) override {
        gpu::add_rows(y, b, n_rows, n, cuda(s));
    }
    void kv_store(const float* src, const KvRows& r, Stream& s) override {
        gpu::kv_store(src, r.cache, r.type, r.block, r.row, r.n_tok, r.n, elements(r.type, r.row_stride),
                      elements(r.type, r.block_stride), cuda(s));
    }
    void kv_gather(const KvRows& r, float* dst, Stream& s) override {
        gpu::kv_gather(r.cache, r.type, r.block, r.row, r.n_tok, r.n, elements(r.type, r.row_stride),
                       elements(r.type, r.block_stride), dst, cuda(s));
    }
    void decode_attention(const DecodeAttentionArgs& a, Stream& s) override {
        CudaAttentionArgs c;
        c.q = a.q;
        c.out = a.out;
        c.k = a.k;
        c.v = a.v;
        c.kv_type = a.kv_type;
        c.block_tables = a.block_tables;
        c.n_kv = a.n_kv;
        c.n_seq = a.n_seq;
        c.max_blocks = a.max_blocks;
        c.n_head = a.n_head;
        c.n_head_kv = a.n_head_kv;
        c.head_dim = a.head_dim;
        c.kv_stride = elements(a.kv_type, a.row_stride);
        c.block_stride = elements(a.kv_type, a.block_stride);
        c.scratch = a.scratch;
        gpu::decode_attention(c, cuda(s));
    }

private:
    std::string name_;
    Cublas cublas_;
    DeviceBuffer w16_, x16_;  // reserve_matmul's half-precision copies
};

}  // namespace

std::unique_ptr<Device> make_cuda_device(int index, uint64_t budget_bytes) {
    return std::make_unique<CudaDevice>(index, budget_bytes);
}

}  // namespace strata::gpu
