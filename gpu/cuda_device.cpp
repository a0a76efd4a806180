// The CUDA device behind the device interface: the kernels of cuda_kernels.h on CudaStreams,
// memory from one cudaMalloc of the budget. Each stream keeps the scratch its matmuls need (the
// activations quantized or in half precision), grown when a product needs more than it has.
#include <algorithm>
#include <array>
#include <map>
#include <string>

#include <fmt/format.h>

#include "core/error.h"
#include "gpu/cuda_graph.h"
#include "gpu/cuda_kernels.h"
#include "gpu/kernels/clamped_glu_rows.h"
#include "gpu/cuda_stream.h"
#include "gpu/device.h"

namespace strata::gpu {

namespace {

class CudaDevice final : public Device {
public:
    CudaDevice(int index, uint64_t budget, bool int8_activations)
        : Device(budget, cuda_malloc_pool(index, budget), cuda_free_pool),
          name_(fmt::format("cuda:{}", index)),
          two_level_acts_(!int8_activations) {}

    std::string_view name() const override { return name_; }
    std::unique_ptr<Stream> make_stream(std::string_view name) override {
        auto s = std::make_unique<CudaStream>();
        track_[s.get()] = fmt::format("{}: {}", name_, name);
        return s;
    }
    void set_trace(Trace* trace) override {
        if (trace && !timer_) {
            timer_ = std::make_unique<CudaTimer>();
            spans_ = std::make_unique<DeviceTrace>(*timer_, timer_->origin_host());
        }
        if (spans_) spans_->set_trace(trace);
    }
    void collect_trace() override {
        if (spans_) spans_->collect();
    }
    std::unique_ptr<Event> make_event() override { return std::make_unique<CudaEvent>(); }
    std::unique_ptr<Graph> capture(Stream& s, const std::function<void()>& work) override {
        return std::make_unique<TracedGraph>(capture_cuda_graph(cuda(s), work), *this);
    }
    bool supports_weight(DType t) const override { return gpu_weight_type(t); }
    bool supports_kv(DType t) const override { return gpu_kv_type(t); }
    size_t attention_scratch_floats(int32_t n_seq, int32_t n_head, int32_t head_dim, int32_t max_blocks) const override {
        return gpu::attention_scratch_floats(n_seq, n_head, head_dim, max_blocks);
    }
    void reserve_matmul(int64_t max_rows, int64_t max_cols) override { reserved_ = matmul_scratch_bytes(max_rows, max_cols); }
    uint64_t matmul_scratch_bytes(int64_t max_rows, int64_t max_cols) const override {
        return max_product_scratch_bytes(max_rows, max_cols);
    }

    void copy_h2d(void* dst, const void* src, size_t bytes, Stream& s) override {
        traced(s, "copy_h2d", [&] { gpu::copy_h2d(dst, src, bytes, cuda(s)); });
    }
    void copy_d2h(void* dst, const void* src, size_t bytes, Stream& s) override {
        traced(s, "copy_d2h", [&] { gpu::copy_d2h(dst, src, bytes, cuda(s)); });
    }
    void copy_d2d(void* dst, const void* src, size_t bytes, Stream& s) override {
        traced(s, "copy_d2d", [&] { gpu::copy_d2d(dst, src, bytes, cuda(s)); });
    }

    void products(std::span<const MatmulArgs> run, bool input_ready, Stream& s) override {
        traced(s, "matmul", [&] { products_on(run, input_ready, cuda(s)); });
    }
    void products_on(std::span<const MatmulArgs> run, bool input_ready, CudaStream& cs) {  // products, untraced
        std::array<WeightMatmul, kDeviceLaunchProducts> ms;
        STRATA_ASSERT(!run.empty() && run.size() <= ms.size());
        uint64_t scratch_bytes = reserved_;
        for (size_t i = 0; i < run.size(); ++i) {
            const MatmulArgs& a = run[i];
            // ldy: y's rows are the weight's rows apart.
            ms[i] = {a.type, a.w, a.x, a.y, a.n_rows, a.n_cols, a.n_tok, a.n_rows, a.accumulate, two_level_acts_,
                     {a.norm_w, a.norm_eps, a.swiglu_up}};
            scratch_bytes = std::max(scratch_bytes, product_scratch_bytes(ms[i]));
        }
        const MatmulArgs& a = run[0];
        const InputFormat format = input_format(ms[0]);  // the same for every product of the run
        const PreparedInput key{a.x, ms[0].in, a.n_tok, a.n_cols, format};
        void* scratch = cs.scratch(memory(), scratch_bytes);
        // What the scratch holds is this group's input only if an earlier run of the group
        // prepared it: an earlier group's at the same address may hold other values.
        if (!input_ready) cs.set_prepared({});
        if (format != InputFormat::Direct && !(input_ready && cs.prepared() == key)) {
            prepare_input(a.x, ms[0].in, a.n_tok, a.n_cols, format, scratch, cs);
            cs.set_prepared(key);
        }
        gpu::matmul(std::span<const WeightMatmul>(ms.data(), run.size()), scratch, [this]() -> Cublas& { return cublas(); }, cs);
    }
    void rms_norm(const float* x, const float* w, float* y, int64_t n_rows, int64_t n, float eps, Stream& s) override {
        traced(s, "rms_norm", [&] { gpu::rms_norm(x, w, y, n_rows, n, eps, cuda(s)); });
    }
    void rope(float* x, const int32_t* pos, int64_t n_tokens, const RopeArgs& a, Stream& s) override {
        traced(s, "rope", [&] { gpu::rope(x, pos, n_tokens, a, cuda(s)); });
    }
    void swiglu(float* gate, const float* up, int64_t n_rows, int64_t n, Stream& s) override {
        traced(s, "swiglu", [&] { gpu::swiglu(gate, up, n_rows * n, cuda(s)); });
    }
    void geglu(float* gate, const float* up, int64_t n_rows, int64_t n, Stream& s) override {
        traced(s, "geglu", [&] { gpu::geglu(gate, up, n_rows * n, cuda(s)); });
    }
    void softcap(float* x, int64_t n, float cap, Stream& s) override {
        traced(s, "softcap", [&] { gpu::softcap(x, n, cap, cuda(s)); });
    }
    void add(float* y, const float* x, int64_t n, Stream& s) override {
        traced(s, "add", [&] { gpu::add(y, x, n, cuda(s)); });
    }
    void add_rows(float* y, const float* b, int64_t n_rows, int64_t n, Stream& s) override {
        traced(s, "add_rows", [&] { gpu::add_rows(y, b, n_rows, n, cuda(s)); });
    }
    void head_matmul(const HeadMatmulArgs& a, Stream& s) override {
        traced(s, "head_matmul", [&] { gpu::head_matmul(a, cuda(s)); });
    }
    void kv_store(const float* src, const KvRows& r, Stream& s) override {
        traced(s, "kv_store", [&] { gpu::kv_store(src, r, cuda(s)); });
    }
    void rope_qkv_store(const QkvStoreArgs& a, Stream& s) override {
        traced(s, "rope_qkv_store", [&] { gpu::rope_qkv_store(a, cuda(s)); });
    }
    void kv_gather(const KvRows& r, float* dst, Stream& s) override {
        traced(s, "kv_gather", [&] { gpu::kv_gather(r, dst, cuda(s)); });
    }
    void swiglu_clamped(float* gate, const float* up, int64_t n_rows, int64_t n, float alpha, float limit,
                        Stream& s) override {
        traced(s, "swiglu_clamped", [&] { gpu::swiglu_clamped(gate, up, n_rows * n, alpha, limit, cuda(s)); });
    }
    void copy_rows(float* dst, int64_t dst_stride, const float* src, int64_t src_stride, int64_t n_rows, int64_t n,
                   Stream& s) override {
        traced(s, "copy_rows", [&] { gpu::copy_rows(dst, dst_stride, src, src_stride, n_rows, n, cuda(s)); });
    }
    void decode_attention(const DecodeAttentionArgs& a, Stream& s) override {
        traced(s, "decode_attention", [&] { gpu::attention(a, cuda(s)); });
    }

private:
    // A captured graph's launch is one span on the trace: the ops inside it cannot be timed one
    // by one, but the step they make up can.
    class TracedGraph final : public Graph {
    public:
        TracedGraph(std::unique_ptr<Graph> graph, CudaDevice& device) : graph_(std::move(graph)), device_(device) {}
        void launch(Stream& s) override { device_.traced(s, "graph", [&] { graph_->launch(s); }); }

    private:
        std::unique_ptr<Graph> graph_;
        CudaDevice& device_;
    };

    // Queues `launch` on `s` between two timestamps when tracing (not while the stream is
    // captured into a graph, whose launches are one op to the trace).
    template <class Launch>
    void traced(Stream& s, const char* what, Launch launch) {
        if (!spans_ || !spans_->on() || cuda(s).capturing()) return launch();
        const int begin = spans_->begin(s);
        launch();
        spans_->end(begin, s, track_.at(&s), what);
    }

    // Made on first use (never inside a graph capture: decode products do not use it), so a
    // process that only copies or decodes never loads cuBLAS.
    Cublas& cublas() {
        if (!cublas_) cublas_ = std::make_unique<Cublas>();
        return *cublas_;
    }

    std::string name_;
    bool two_level_acts_;
    uint64_t reserved_ = 0;  // reserve_matmul's scratch bytes, the least each stream keeps
    std::unique_ptr<Cublas> cublas_;
    std::map<const Stream*, std::string> track_;  // each stream's track in a trace
    std::unique_ptr<CudaTimer> timer_;            // made when tracing starts
    std::unique_ptr<DeviceTrace> spans_;
};

}  // namespace

std::unique_ptr<Device> make_cuda_device(int index, uint64_t budget_bytes, bool int8_activations) {
    return std::make_unique<CudaDevice>(index, budget_bytes, int8_activations);
}

}  // namespace strata::gpu
