// The simulated device: the device interface on the CPU, so that every plan the runtime runs on
// a GPU runs in CI. Its memory is host memory counted against --gpu-mem; copies are real copies
// throttled to the link's rate on the streams' own threads; ops run the CPU kernels (the same
// ones, in the same row groups, as the CPU engine, so results are identical) on a thread pool of
// the device's own, one op at a time, so CPU-side work really overlaps with device work.
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/bytes.h"
#include "core/error.h"
#include "core/log.h"
#include "core/trace.h"
#include "cpu/attention_cpu.h"
#include "cpu/kv_format.h"
#include "cpu/matmul.h"
#include "cpu/norm_rope_act.h"
#include "cpu/quant.h"
#include "cpu/thread_pool.h"
#include "gpu/device.h"
#include "gpu/sim_stream.h"

namespace strata::gpu {

namespace {

using Clock = std::chrono::steady_clock;

// One direction of the host <-> device link: transfers take their turn at `gbps`.
class Link {
public:
    explicit Link(double gbps) : seconds_per_byte_(1.0 / (gbps * 1e9)) {}
    void transfer(void* dst, const void* src, size_t bytes) {
        Clock::time_point end;
        {
            std::lock_guard lock(mutex_);
            const Clock::time_point start = std::max(Clock::now(), free_at_);
            end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(bytes * seconds_per_byte_));
            free_at_ = end;
        }
        std::memcpy(dst, src, bytes);
        // A sleep costs the timer's slack (50 us and more), far longer than a small copy takes on
        // the link: sleep through long waits only, and yield out the rest.
        constexpr auto kSleepAbove = std::chrono::microseconds(200);
        if (end - Clock::now() > kSleepAbove) std::this_thread::sleep_until(end - kSleepAbove / 2);
        while (Clock::now() < end) std::this_thread::yield();
    }

private:
    double seconds_per_byte_;
    std::mutex mutex_;
    Clock::time_point free_at_{};
};

// Whole 2 MiB pages, huge-page backed: a GPU's memory has no 4 KiB pages to miss in the TLB, and
// the host's resident weights are on huge pages too, so the device's matmuls stream at the rate
// the host's do on the same threads.
void* allocate_host(uint64_t bytes) {
    if (bytes == 0) return nullptr;
    constexpr uint64_t kHugePage = uint64_t{2} << 20;
    const uint64_t n = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void* p = std::aligned_alloc(kHugePage, n);
    if (!p)
        throw OutOfBudget(fmt::format("cannot allocate {} of host memory for the simulated device", format_bytes(bytes)),
                          "give the simulated device less with --gpu-mem");
    ::madvise(p, n, MADV_HUGEPAGE);
    return p;
}

// A captured graph: the ops as they were queued, queued again on each launch. Traced, a launch
// is a slice "graph" around its ops' own, as CUDA's trace shows it as one span.
class SimGraph final : public Graph {
public:
    SimGraph(std::vector<std::function<void()>> ops, const std::atomic<Trace*>& trace) : ops_(std::move(ops)), trace_(trace) {}
    void launch(Stream& s) override {
        SimStream& stream = sim(s);
        Trace* t = trace_.load();
        if (!t) {
            for (const auto& op : ops_) stream.enqueue(op);
            return;
        }
        const auto begin = std::make_shared<Trace::Clock::time_point>();
        stream.enqueue([begin] { *begin = Trace::Clock::now(); });
        for (const auto& op : ops_) stream.enqueue(op);
        stream.enqueue([t, begin, &stream] { t->slice(t->track("sim: " + stream.name()), "graph", *begin, Trace::Clock::now()); });
    }

private:
    std::vector<std::function<void()>> ops_;
    const std::atomic<Trace*>& trace_;  // the device's
};

class SimDevice final : public Device {
public:
    explicit SimDevice(const SimOptions& o)
        : Device(o.budget_bytes, allocate_host(o.budget_bytes), [](void* p) { std::free(p); }),
          opts_(o), h2d_(o.link_gbps), d2h_(o.link_gbps), pool_(std::max(1, o.n_threads)) {
        if (!(o.link_gbps > 0)) throw UsageError(fmt::format("--sim-link {} must be above 0 GB/s", o.link_gbps));
        if (o.shrink_after == 0) take_memory();
    }

    uint64_t poll_memory() override {
        if (opts_.shrink_after > 0 && polls_++ == opts_.shrink_after) take_memory();
        return memory().arena().limit();
    }

    std::string_view name() const override { return "sim"; }
    std::unique_ptr<Stream> make_stream(std::string_view name) override { return std::make_unique<SimStream>(std::string(name)); }
    void set_trace(Trace* trace) override { trace_ = trace; }
    std::unique_ptr<Event> make_event() override { return std::make_unique<SimEvent>(); }
    std::unique_ptr<Graph> capture(Stream& s, const std::function<void()>& work) override {
        SimStream& stream = sim(s);
        stream.begin_capture();
        try {
            work();
        } catch (...) {
            stream.end_capture();
            throw;
        }
        return std::make_unique<SimGraph>(stream.end_capture(), trace_);
    }
    bool supports_weight(DType t) const override { return cpu::has_kernels(t); }
    bool supports_kv(DType t) const override { return cpu::is_kv_type(t); }
    size_t attention_scratch_floats(int32_t, int32_t, int32_t, int32_t) const override { return 0; }
    void reserve_matmul(int64_t, int64_t) override {}  // the CPU kernels' scratch is their own
    uint64_t matmul_scratch_bytes(int64_t, int64_t) const override { return 0; }

    void copy_h2d(void* dst, const void* src, size_t bytes, Stream& s) override {
        run(s, "copy to device", [=, this] { h2d_.transfer(dst, src, bytes); });
    }
    void copy_d2h(void* dst, const void* src, size_t bytes, Stream& s) override {
        run(s, "copy to host", [=, this] { d2h_.transfer(dst, src, bytes); });
    }
    void copy_d2d(void* dst, const void* src, size_t bytes, Stream& s) override {
        run(s, "copy on device", [=] { std::memcpy(dst, src, bytes); });
    }

    // The run as one op, as the CUDA device launches it: the input transformed once, then the
    // products in one parallel loop (cpu::matmul_many, as the CPU engine computes q, k and v).
    void products(std::span<const MatmulArgs> run, bool, Stream& s) override {
        compute(s, "matmul", [parts = std::vector<MatmulArgs>(run.begin(), run.end()), int8 = opts_.int8_activations] {
            const MatmulArgs& in = parts[0];
            const int64_t n = in.n_cols;
            std::vector<float> transformed(in.norm_w || in.swiglu_up ? size_t(in.n_tok * n) : 0);
            const float* x = in.x;
            if (!transformed.empty()) {
                float* t = transformed.data();
                cpu::parallel_for(in.n_tok, [&](int64_t r) {
                    if (in.norm_w) return cpu::rms_norm(in.x + r * n, in.norm_w, t + r * n, n, in.norm_eps);
                    std::copy_n(in.x + r * n, n, t + r * n);
                    cpu::swiglu(t + r * n, in.swiglu_up + r * n, n);
                });
                x = t;
            }
            multiply(parts, x, int8);
        });
    }
    // Each head's values gathered into rows of their own, multiplied as products() multiplies
    // them, and the products written to the head's place.
    void head_matmul(const HeadMatmulArgs& a, Stream& s) override {
        compute(s, "head_matmul", [a, int8 = opts_.int8_activations] {
            std::vector<float> in(size_t(a.n_tok * a.n_cols)), out(size_t(a.n_tok * a.n_rows));
            const uint64_t head_bytes = row_bytes(a.type, a.n_cols) * uint64_t(a.n_rows);
            for (int32_t h = 0; h < a.n_heads; ++h) {
                for (int64_t t = 0; t < a.n_tok; ++t) std::copy_n(a.x + t * a.x_row + h * a.x_head, a.n_cols, &in[size_t(t * a.n_cols)]);
                const MatmulArgs m{a.type, static_cast<const std::byte*>(a.w) + h * head_bytes, in.data(), out.data(), a.n_rows,
                                   a.n_cols, a.n_tok};
                multiply(std::span(&m, 1), in.data(), int8);
                for (int64_t t = 0; t < a.n_tok; ++t) std::copy_n(&out[size_t(t * a.n_rows)], a.n_rows, a.y + t * a.y_row + h * a.y_head);
            }
        });
    }
    void rms_norm(const float* x, const float* w, float* y, int64_t n_rows, int64_t n, float eps, Stream& s) override {
        compute(s, "rms_norm", [=] { cpu::parallel_for(n_rows, [&](int64_t r) { cpu::rms_norm(x + r * n, w, y + r * n, n, eps); }); });
    }
    void rope(float* x, const int32_t* pos, int64_t n_tokens, const RopeArgs& a, Stream& s) override {
        compute(s, "rope", [=] {
            const cpu::RopeParams p = rope_params(a);
            const int64_t width = a.row_width > 0 ? a.row_width : int64_t(a.n_heads) * a.head_dim;
            cpu::parallel_for(n_tokens, [&](int64_t t) { cpu::rope(x + t * width, a.n_heads, pos[t], p); });
        });
    }
    void swiglu(float* gate, const float* up, int64_t n_rows, int64_t n, Stream& s) override {
        compute(s, "swiglu", [=] { cpu::parallel_for(n_rows, [&](int64_t r) { cpu::swiglu(gate + r * n, up + r * n, n); }); });
    }
    void geglu(float* gate, const float* up, int64_t n_rows, int64_t n, Stream& s) override {
        compute(s, "geglu", [=] { cpu::parallel_for(n_rows, [&](int64_t r) { cpu::geglu(gate + r * n, up + r * n, n); }); });
    }
    void swiglu_clamped(float* gate, const float* up, int64_t n_rows, int64_t n, float alpha, float limit,
                        Stream& s) override {
        compute(s, "swiglu_clamped", [=] {
            cpu::parallel_for(n_rows, [&](int64_t r) { cpu::swiglu_clamped(gate + r * n, up + r * n, n, alpha, limit); });
        });
    }
    void copy_rows(float* dst, int64_t dst_stride, const float* src, int64_t src_stride, int64_t n_rows, int64_t n,
                   Stream& s) override {
        compute(s, "copy_rows", [=] {
            cpu::parallel_for(n_rows, [&](int64_t r) { std::copy_n(src + r * src_stride, n, dst + r * dst_stride); });
        });
    }
    void softcap(float* x, int64_t n, float cap, Stream& s) override {
        compute(s, "softcap", [=] { cpu::softcap(x, n, cap); });
    }
    void add(float* y, const float* x, int64_t n, Stream& s) override {
        compute(s, "add", [=] { cpu::add(y, x, n); });
    }
    void add_rows(float* y, const float* b, int64_t n_rows, int64_t n, Stream& s) override {
        compute(s, "add_rows", [=] { cpu::parallel_for(n_rows, [&](int64_t r) { cpu::add(y + r * n, b, n); }); });
    }
    void kv_store(const float* src, const KvRows& r, Stream& s) override {
        compute(s, "kv_store", [=] {
            cpu::parallel_for(r.n_tok, [&](int64_t t) { cpu::store_kv_row(r.type, src + t * r.n, row_at(r, t), r.n); });
        });
    }
    void rope_qkv_store(const QkvStoreArgs& a, Stream& s) override {
        compute(s, "rope_qkv_store", [=] {
            const KvRows &kr = a.k_rows, &vr = a.v_rows;
            const cpu::RopeParams qp = rope_params(a.q_rope), kp = rope_params(a.k_rope);
            const int64_t q_width = a.q_rope.row_width > 0 ? a.q_rope.row_width : int64_t(a.q_rope.n_heads) * a.q_rope.head_dim;
            cpu::parallel_for(kr.n_tok, [&](int64_t t) {
                if (a.q) cpu::rope(a.q + t * q_width, a.q_rope.n_heads, a.pos[t], qp);
                if (!kr.cache) return cpu::rope(a.k + t * kr.n, a.k_rope.n_heads, a.pos[t], kp);
                std::vector<float> key(a.k + t * kr.n, a.k + (t + 1) * kr.n);
                cpu::rope(key.data(), a.k_rope.n_heads, a.pos[t], kp);
                cpu::store_kv_row(kr.type, key.data(), row_at(kr, t), kr.n);
                if (a.v) cpu::store_kv_row(vr.type, a.v + t * vr.n, row_at(vr, t), vr.n);
            });
        });
    }
    void kv_gather(const KvRows& r, float* dst, Stream& s) override {
        compute(s, "kv_gather", [=] {
            cpu::parallel_for(r.n_tok, [&](int64_t t) { cpu::load_kv_values(r.type, row_at(r, t), 0, dst + t * r.n, r.n); });
        });
    }
    // Consecutive query rows of one sequence (the same block table, positions one apart) go to
    // cpu::attention together, as the CPU engine runs a sequence's rows; so do a draft tree's
    // (the same table and tree), with the CPU's tree attention. All the sequences' tiles run in
    // one parallel loop (cpu::attention_batch), as CUDA's kernel takes the batch at once.
    void decode_attention(const DecodeAttentionArgs& a, Stream& s) override {
        compute(s, "decode_attention", [=] {
            const int64_t Q = int64_t(a.n_head) * a.head_dim;
            const int64_t O = int64_t(a.n_head) * (a.v_head_dim > 0 ? a.v_head_dim : a.head_dim);
            auto in_tree = [&](int32_t r) { return a.tree_mask && a.tree_base[r] < a.n_kv[r]; };
            // Each tree's rows as cpu::AttentionTree takes them: each key's position is its rank
            // among the ancestors of a row that sees it. Held until the batch has run.
            struct TreeRows {
                std::vector<int64_t> slot, pos, key_pos;
                cpu::AttentionTree tree;
            };
            std::deque<TreeRows> trees;
            std::vector<cpu::AttentionArgs> batch;
            for (int32_t first = 0; first < a.n_seq;) {
                const int32_t* table = a.block_tables + int64_t(first) * a.max_blocks;
                const bool tree = in_tree(first);
                auto together = [&](int32_t r) {
                    const bool same = tree ? in_tree(r) && a.tree_base[r] == a.tree_base[first] : !in_tree(r) && a.n_kv[r] == a.n_kv[r - 1] + 1;
                    return same && std::equal(table, table + a.max_blocks, a.block_tables + int64_t(r) * a.max_blocks);
                };
                int32_t end = first + 1;
                while (end < a.n_seq && together(end)) ++end;
                const cpu::AttentionTree* t = nullptr;
                if (tree) {
                    TreeRows& tr = trees.emplace_back();
                    const int64_t base = a.tree_base[first];
                    tr.key_pos.assign(size_t(a.tree_words) * 64, -1);
                    for (int32_t r = first; r < end; ++r) {
                        tr.slot.push_back(a.n_kv[r] - 1);
                        tr.pos.push_back(a.pos[r]);
                        const uint64_t* mask = a.tree_mask + int64_t(r) * a.tree_words;
                        for (int64_t i = 0, rank = 0; i < int64_t(tr.key_pos.size()); ++i)
                            if (mask[i / 64] >> (i % 64) & 1) tr.key_pos[size_t(i)] = base + rank++;
                    }
                    tr.tree = {base, tr.slot.data(), tr.pos.data(), tr.key_pos.data(), a.tree_mask + int64_t(first) * a.tree_words,
                               a.tree_words};
                    t = &tr.tree;
                }
                cpu::AttentionArgs& c = batch.emplace_back();
                c.tree = t;
                c.q = a.q + first * Q;
                c.k = a.k;
                c.v = a.v;
                c.out = a.out + first * O;
                c.n_tokens = end - first;
                c.pos0 = a.n_kv[first] - 1;
                c.n_head = a.n_head;
                c.n_head_kv = a.n_head_kv;
                c.head_dim = a.head_dim;
                c.kv_stride = a.row_stride;
                c.kv_type = a.kv_type;
                c.block_table = table;
                c.block_size = kKvBlockSize;
                c.block_stride = a.block_stride;
                c.window = a.window;
                c.scale = a.scale;
                c.softcap = a.softcap;
                c.sinks = a.sinks;
                c.v_head_dim = a.v_head_dim;
                first = end;
            }
            cpu::attention_batch(batch);
        });
    }

private:
    // The parts' products of x (n_tok rows of the first part's n_cols), y accumulated where a part
    // says: rows that get the bits they get alone (a run's parts are of one type): for
    // block-quantized weights as many as the CPU keeps row-invariant (integer dot products, but
    // for AMX's prefill from 16 rows), up to cpu::kDecodeTokens at a time for float weights.
    static void multiply(std::span<const MatmulArgs> parts, const float* x, bool int8) {
        const MatmulArgs& in = parts[0];
        const int64_t n = in.n_cols;
        // Accumulated products are summed apart, then added.
        std::vector<std::vector<float>> sums(parts.size());
        for (size_t i = 0; i < parts.size(); ++i)
            if (parts[i].accumulate) sums[i].resize(size_t(in.n_tok * parts[i].n_rows));
        const bool any_rows = cpu::act_format_for(in.type) != cpu::ActFormat::F32;
        const int64_t step = in.n_tok > kRowWiseRows ? in.n_tok
                             : any_rows              ? std::min(in.n_tok, cpu::row_invariant_tokens())
                                                     : cpu::kDecodeTokens;
        std::vector<cpu::MatmulOut> outs(parts.size());
        for (int64_t t = 0; t < in.n_tok; t += step) {
            for (size_t i = 0; i < parts.size(); ++i) {
                const MatmulArgs& a = parts[i];
                outs[i] = {a.type, a.w, a.n_rows, (a.accumulate ? sums[i].data() : a.y) + t * a.n_rows};
            }
            cpu::matmul_many(outs, n, x + t * n, std::min(step, in.n_tok - t), int8);
        }
        for (size_t i = 0; i < parts.size(); ++i)
            if (parts[i].accumulate) cpu::add(parts[i].y, sums[i].data(), in.n_tok * parts[i].n_rows);
    }
    // What another program's allocation would do to a GPU: the pool's limit drops.
    void take_memory() {
        const uint64_t before = memory().arena().limit();
        memory().set_limit(before > opts_.shrink_bytes ? before - opts_.shrink_bytes : 0);
        STRATA_LOG_WARN("sim: {} of device memory taken away (--sim-shrink-after); {} left of {}",
                        format_bytes(opts_.shrink_bytes), format_bytes(memory().arena().limit()), format_bytes(before));
    }
    int64_t polls_ = 0;
    static cpu::RopeParams rope_params(const RopeArgs& a) {
        return {a.head_dim,    a.n_rot,       a.freq_base, a.freq_scale, a.neox,
                a.freq_factors, a.attn_factor, a.ext_factor, a.yarn_low,  a.yarn_high};
    }
    static void* row_at(const KvRows& r, int64_t t) {
        return static_cast<std::byte*>(r.cache) + r.block[t] * r.block_stride + r.row[t] * r.row_stride;
    }
    // Queues `work` on `s`, recorded as a slice named `what` on the stream's track when tracing.
    template <class Work>
    void run(Stream& s, const char* what, Work work) {
        SimStream& stream = sim(s);
        stream.enqueue([this, &stream, what, work = std::move(work)] {
            const auto begin = Trace::Clock::now();
            work();
            if (Trace* t = trace_) t->slice(t->track("sim: " + stream.name()), what, begin, Trace::Clock::now());
        });
    }
    // An op: it runs on the device's own threads, one op at a time, as a GPU's streams share
    // its multiprocessors.
    template <class Op>
    void compute(Stream& s, const char* what, Op op) {
        run(s, what, [this, op = std::move(op)] {
            std::lock_guard lock(compute_mutex_);
            pool_.run(op);
        });
    }

    SimOptions opts_;
    std::atomic<Trace*> trace_{nullptr};
    Link h2d_, d2h_;
    std::mutex compute_mutex_;
    cpu::ThreadPool pool_;
};

}  // namespace

int default_sim_threads() { return std::max(1, cpu::default_thread_count() / 2); }

std::unique_ptr<Device> make_sim_device(const SimOptions& opts) { return std::make_unique<SimDevice>(opts); }

}  // namespace strata::gpu
