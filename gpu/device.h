#pragma once
// The device interface: what the runtime's device backend (runtime/exec/device/device_backend.h) needs
// of an accelerator, in the shape of ggml-backend's device / buffer / event split. Memory with a
// hard budget (DevicePool), streams that run work in order, events between streams and the host,
// host <-> device copies, and the ops a layer program's steps need (runtime/exec/layer_program.h). Two implementations: the
// CUDA device (cuda_device.cpp) and the simulated device (sim_device.cpp), which runs the CPU
// kernels on threads of its own and throttles its copies, so every plan runs in CI without a GPU.
// Calls queue work and return at once; errors inside queued work surface at synchronize().
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "core/dtype.h"
#include "core/kernel_shapes.h"
#include "gpu/device_pool.h"

namespace strata { class Trace; }

namespace strata::gpu {

// A queue of device work, run in the order it was queued.
class Stream {
public:
    virtual ~Stream() = default;
    // Waits for everything queued so far; throws BackendError when queued work failed.
    virtual void synchronize() = 0;
};

// A point in a stream's work that other streams and the host can wait for.
class Event {
public:
    virtual ~Event() = default;
    virtual void record(Stream& s) = 0;   // marks the work queued on `s` so far
    virtual void wait_on(Stream& s) = 0;  // work queued on `s` after this waits for the recorded work
    virtual void synchronize() = 0;       // the host waits for the recorded work
};

// Device work recorded once and run again: a CUDA graph, or the simulated device's list of
// queued ops. Each op runs with the arguments it was queued with; what it reads from device
// memory is read when the graph runs, so a step's changing inputs (positions, block tables, key
// counts) belong in device buffers written before each launch.
class Graph {
public:
    virtual ~Graph() = default;
    virtual void launch(Stream& s) = 0;
};

// y rows = f(x rows) W^T (added to y with `accumulate`): `w` is n_rows x n_cols in its GGUF
// type, as laid out in the file; x holds n_tok rows of n_cols floats, y n_tok rows of n_rows
// floats. f is the input's transform, applied on the way into the product so that it needs no
// pass (and no buffer) of its own: none; RMSNorm, x / sqrt(mean(x^2) + norm_eps) * norm_w; or
// SwiGLU, silu(x) * swiglu_up.
struct MatmulArgs {
    DType type = DType::F32;
    const void* w = nullptr;
    const float* x = nullptr;
    float* y = nullptr;
    int64_t n_rows = 0, n_cols = 0, n_tok = 0;
    bool accumulate = false;
    const float* norm_w = nullptr;
    float norm_eps = 0.0f;
    const float* swiglu_up = nullptr;
};

// Products of each head with a matrix of its own (MLA's attn_k_b and attn_v_b): for head h of
// n_heads and token row t of n_tok, the n_rows values at y + t * y_row + h * y_head are W_h times
// the n_cols values at x + t * x_row + h * x_head. W_h is n_rows x n_cols in its GGUF type, head
// h's matrix after the h before it (a 3-D tensor as the file lays it out). Each head's products
// are what a matmul of its values gathered into rows of their own would give, bit for bit on the
// simulated device (CUDA reads the values as floats, where its matmul quantizes them as the CPU
// does: the same products within rounding); x and y do not overlap.
struct HeadMatmulArgs {
    DType type = DType::F32;
    const void* w = nullptr;
    const float* x = nullptr;
    float* y = nullptr;
    int64_t n_rows = 0, n_cols = 0, n_tok = 0;
    int32_t n_heads = 0;
    int64_t x_row = 0, x_head = 0, y_row = 0, y_head = 0;  // floats
};

struct RopeArgs {
    int32_t n_heads = 0;
    int32_t head_dim = 0;
    int32_t n_rot = 0;          // rotated dimensions at the start of each head
    float freq_base = 10000.0f;
    float freq_scale = 1.0f;
    bool neox = false;          // pairs (i, i + n_rot/2) instead of (2i, 2i+1)
    const float* freq_factors = nullptr;  // device, n_rot/2 divisors, or null
    float attn_factor = 1.0f;   // cos and sin scaled by it (phi3 LongRoPE, YaRN's magnitude)
    // YaRN (deepseek2, gpt-oss), as cpu::RopeParams has it: ext_factor 0 is none.
    float ext_factor = 0.0f;
    float yarn_low = 0.0f;
    float yarn_high = 0.0f;
    // Values per token row (0: n_heads * head_dim), for heads that start inside a wider row
    // (MLA rotates the RoPE part at the end of each head, x pointing at head 0's).
    int64_t row_width = 0;
};

// Rows of a paged KV cache: row t of an op is row row[t] of block block[t] (device arrays), at
// cache + block * block_stride + row * row_stride bytes.
struct KvRows {
    void* cache = nullptr;
    DType type = DType::F32;
    const int32_t* block = nullptr;
    const int32_t* row = nullptr;
    int64_t n_tok = 0;
    int64_t n = 0;               // values per row
    int64_t row_stride = 0;      // bytes between consecutive positions of a block
    int64_t block_stride = 0;    // bytes between blocks
};

// A layer's queries, keys and values once projected, for Device::rope_qkv_store: the queries
// rotated in place (RoPE at pos), the keys rotated on their way into k_rows (the key rows left as
// they are: one pass where nothing else reads the rotated keys), the values stored into v_rows.
// No queries or no values where q or v is null (MLA's latent is its values). With no key cache
// (k_rows.cache null: the host holds the KV cache) the keys are rotated in place and there are
// no values. k_rows.n_tok rows; both caches of one type.
struct QkvStoreArgs {
    float* q = nullptr;
    RopeArgs q_rope;
    float* k = nullptr;
    RopeArgs k_rope;
    KvRows k_rows;
    const float* v = nullptr;
    KvRows v_rows;
    const int32_t* pos = nullptr;
};

// Rows [first, first + n) of an attention call that are one sequence's consecutive positions.
struct QueryRun {
    int32_t first = 0, n = 0;
};

struct DecodeAttentionArgs {
    const float* q = nullptr;    // n_seq x (n_head * head_dim): one query token per "sequence"
    float* out = nullptr;        // n_seq x (n_head * v_head_dim), v_head_dim 0: head_dim
    const void* k = nullptr;     // KV cache: position p of a sequence is row p % kKvBlockSize of
    const void* v = nullptr;     //   block block_table[p / kKvBlockSize] (core/kernel_shapes.h), block b at k + b * block_stride bytes
    DType kv_type = DType::F32;
    const int32_t* block_tables = nullptr;  // n_seq x max_blocks (device)
    const int32_t* n_kv = nullptr;          // n_seq key counts (device): the query's position + 1
    int32_t n_seq = 0;
    int32_t max_blocks = 0;      // block table row length; every n_kv <= kKvBlockSize * max_blocks
    int32_t n_head = 0;
    int32_t n_head_kv = 0;       // divides n_head (grouped-query attention)
    int32_t head_dim = 0;
    int64_t row_stride = 0;      // bytes between consecutive positions of a block
    int64_t block_stride = 0;    // bytes between blocks
    float* scratch = nullptr;    // attention_scratch_floats(...) floats (device)
    // Variants, as cpu::AttentionArgs has them (gemma): a sliding window (the query at position
    // p sees keys p - window + 1 .. p; 0: every earlier key), the score scale (0: 1/sqrt(head_dim))
    // and a soft cap of the scaled scores, s -> softcap * tanh(s / softcap) (0: none).
    int32_t window = 0;
    float scale = 0.0f;
    float softcap = 0.0f;
    // As cpu::AttentionArgs has them: attention sinks (gpt-oss; device, n_head logits, or null)
    // and value heads narrower than key heads (MLA: its latent, v = k; 0: head_dim).
    const float* sinks = nullptr;
    int32_t v_head_dim = 0;
    // Runs of rows that are a prompt chunk of one sequence: row first + i attends to
    // n_kv[first] + i keys through row first's block table. Host memory (may be null); the
    // device may compute a run as one tiled prefill instead of row by row. Same results either way.
    const QueryRun* runs = nullptr;
    int32_t n_runs = 0;
    // Rows that are a draft tree's nodes (speculative decoding: runtime/exec/draft_rows.h), in
    // device arrays; null tree_mask: every row causal. Row r sees every key before tree_base[r]
    // and, of keys tree_base[r] + i, those whose bit i is set in its mask (bit i % 64 of
    // tree_mask[r * tree_words + i / 64]): its ancestors' and its own, in position order one a
    // position (the k-th set bit's key stands at position tree_base[r] + k, for a window). Its
    // keys end at its own slot, n_kv[r] - 1; it stands at position pos[r]. A row of no tree has
    // tree_base[r] = n_kv[r] and pos[r] = n_kv[r] - 1. Tree rows are never in `runs`.
    const uint64_t* tree_mask = nullptr;
    const int32_t* tree_base = nullptr;
    const int32_t* pos = nullptr;
    int32_t tree_words = 0;
};

class Device {
public:
    virtual ~Device() = default;
    Device(const Device&) = delete;
    Device& operator=(const Device&) = delete;

    virtual std::string_view name() const = 0;  // "cuda:0", "sim"
    DevicePool& memory() { return pool_; }       // the --gpu-mem budget, carved
    const DevicePool& memory() const { return pool_; }

    // `name` labels the stream's track in a trace ("compute", "h2d").
    virtual std::unique_ptr<Stream> make_stream(std::string_view name) = 0;
    virtual std::unique_ptr<Event> make_event() = 0;
    // Records, without running it, the device work `work` queues on `s`: ops and copies on `s`
    // only (no events, no other stream, no waiting for the device). Throws BackendError when
    // the work breaks that rule or cannot be captured.
    virtual std::unique_ptr<Graph> capture(Stream& s, const std::function<void()>& work) = 0;
    // Records the device's work as slices into `trace` (may be null), a track per stream: the
    // simulated device as its stream threads run it, CUDA through timing events around each op
    // (DeviceTrace), read by collect_trace.
    virtual void set_trace(Trace* trace) {}
    // After a step the host has waited for: the timed work the device has finished goes into the
    // trace; never waits for the device.
    virtual void collect_trace() {}

    // Bytes of its memory the run may hold from now on; the backend asks before each pass and
    // gives back what is over. Memory taken away lowers the pool's limit (DeviceArena::set_limit)
    // before this returns. The simulated device loses SimOptions::shrink_bytes at its
    // shrink_after-th call (a test of memory taken away mid-run). The CUDA device's memory is
    // one cudaMalloc of the budget made at load, which another program's allocations cannot
    // take: its limit stands, and what can still fail mid-run is a pass needing more of the
    // pool than is free (OutOfBudget), which the backend answers the same way.
    virtual uint64_t poll_memory() { return memory().arena().limit(); }

    // What the ops read: weight and KV cache element types.
    virtual bool supports_weight(DType t) const = 0;
    virtual bool supports_kv(DType t) const = 0;
    // Floats of scratch decode_attention needs for these sizes.
    virtual size_t attention_scratch_floats(int32_t n_seq, int32_t n_head, int32_t head_dim, int32_t max_blocks) const = 0;
    // Sets aside the scratch matmul needs for products of up to `max_rows` rows of `max_cols`
    // values (the CUDA device's quantized or half-precision activations), so that no matmul
    // allocates mid-pass; a larger product still works, growing the scratch first.
    virtual void reserve_matmul(int64_t max_rows, int64_t max_cols) = 0;
    // Device bytes reserve_matmul takes for those sizes (for budgeting before the device exists).
    virtual uint64_t matmul_scratch_bytes(int64_t max_rows, int64_t max_cols) const = 0;

    // Copies, ordered on `s`. Host memory must stay valid until the stream reaches them.
    virtual void copy_h2d(void* dst, const void* src, size_t bytes, Stream& s) = 0;
    virtual void copy_d2h(void* dst, const void* src, size_t bytes, Stream& s) = 0;
    virtual void copy_d2d(void* dst, const void* src, size_t bytes, Stream& s) = 0;

    // ---- the ops of a llama block (device pointers; x and y may alias where noted) ----
    // Each row of y as a product of that row alone would give it, for n_tok up to kRowWiseRows.
    static constexpr int64_t kRowWiseRows = kDeviceRowWiseRows;
    void matmul(const MatmulArgs& a, Stream& s) { products(std::span(&a, 1), false, s); }
    // Products of several weights with one input, each into its own y (q, k and v; gate and up):
    // every part reads the first's input: x, its transform and shape (BackendError otherwise). The input is
    // transformed and prepared once (the CUDA device's quantized activations), and the parts
    // launch_products allows run as one launch; each y gets the bits its own matmul gives it. No
    // part's y may overlap the input or another part's y: a launch computes them together.
    void matmul_group(std::span<const MatmulArgs> parts, Stream& s);
    static constexpr size_t kMaxLaunchProducts = kDeviceLaunchProducts;
    // Every head's product (HeadMatmulArgs) in one op, for up to kRowWiseRows rows each as a
    // product of that row alone would give it, or longer runs (a prompt's).
    virtual void head_matmul(const HeadMatmulArgs& a, Stream& s) = 0;
    // y = x / rms(x) * w for n_rows rows of n values (x and y may alias).
    virtual void rms_norm(const float* x, const float* w, float* y, int64_t n_rows, int64_t n, float eps, Stream& s) = 0;
    // Rotates, in place, n_tokens rows of n_heads heads; token t is at position pos[t] (device).
    virtual void rope(float* x, const int32_t* pos, int64_t n_tokens, const RopeArgs& a, Stream& s) = 0;
    // gate = silu(gate) * up, n_rows rows of n values.
    virtual void swiglu(float* gate, const float* up, int64_t n_rows, int64_t n, Stream& s) = 0;
    // gate = gelu(gate) * up (GELU's tanh approximation: gemma's GeGLU), n_rows rows of n values.
    virtual void geglu(float* gate, const float* up, int64_t n_rows, int64_t n, Stream& s) = 0;
    // gpt-oss's clamped SwiGLU, as cpu::swiglu_clamped.
    virtual void swiglu_clamped(float* gate, const float* up, int64_t n_rows, int64_t n, float alpha, float limit,
                                Stream& s) = 0;
    // n_rows rows of n floats from src (rows src_stride floats apart) to dst (dst_stride apart).
    virtual void copy_rows(float* dst, int64_t dst_stride, const float* src, int64_t src_stride, int64_t n_rows, int64_t n,
                           Stream& s) = 0;
    // x = cap * tanh(x / cap), n values: a soft cap of logits (gemma 2).
    virtual void softcap(float* x, int64_t n, float cap, Stream& s) = 0;
    virtual void add(float* y, const float* x, int64_t n, Stream& s) = 0;                              // y += x
    virtual void add_rows(float* y, const float* b, int64_t n_rows, int64_t n, Stream& s) = 0;       // y[t] += b
    // n_tok rows of n floats (src, row-major) into the cache, converted to its type.
    virtual void kv_store(const float* src, const KvRows& dst, Stream& s) = 0;
    // A layer's queries rotated, its keys rotated into the cache and its values stored, in one op
    // (QkvStoreArgs): what rope of q, kv_store of rope(k) and kv_store of v would give (without a
    // key cache: rope of q and rope of k).
    virtual void rope_qkv_store(const QkvStoreArgs& a, Stream& s) = 0;
    // The inverse: n_tok rows of n floats read from the cache into dst.
    virtual void kv_gather(const KvRows& src, float* dst, Stream& s) = 0;
    // Rows of a paged KV cache copied within it, in order: row i of `from` (row[i] of block
    // block[i]) over row i of `to`, whole rows of the cache's type (from.n values): a verified
    // draft tree's kept path moved to its positions. The block and row arrays are host memory,
    // read here; rows next to each other on both sides go as one copy where they do not overlap.
    void kv_move(const KvRows& from, const KvRows& to, Stream& s);
    // softmax(q k^T * scale) v per "sequence" and head over its n_kv keys (its window of them). A
    // prompt's causal attention is the same call with one sequence per query token. A draft
    // tree's row gets exactly what plain decoding at its position gives (its keys summed in
    // position order, as cpu::attention sums them), so that speculating with trees changes no
    // token: the simulated device runs the CPU's kernel, the CUDA kernel reads a tree row's keys
    // by position (kernels/tree_keys.h).
    virtual void decode_attention(const DecodeAttentionArgs& a, Stream& s) = 0;

protected:
    // The products of `run` (one input) as one op; `input_ready`: an earlier op of the same
    // matmul_group came before on `s` (and may have prepared the input).
    virtual void products(std::span<const MatmulArgs> run, bool input_ready, Stream& s) = 0;
    // The device's memory: `budget_bytes` at `base`, freed by `release` when the device goes.
    Device(uint64_t budget_bytes, void* base, DevicePool::Release release) : pool_(budget_bytes, base, std::move(release)) {}

private:
    DevicePool pool_;
};

// How many of `parts` (a group's, from its first) one launch takes: decode products (at most
// kRowWiseRows rows) of the first's weight type, at most kMaxLaunchProducts; else 1.
size_t launch_products(std::span<const MatmulArgs> parts);

// The CUDA device `index` with a pool of `budget_bytes`. Throws BackendError when there is none
// (or this build has no CUDA) and OutOfBudget-style BackendError when the budget cannot be had.
// `int8_activations`: block-quantized weights meet single-level int8 activations (--int8-acts),
// else the CPU's two-level Q8x2.
std::unique_ptr<Device> make_cuda_device(int index, uint64_t budget_bytes, bool int8_activations = false);

// CPU threads the simulated device's ops run on unless told: half the cores.
int default_sim_threads();

struct SimOptions {
    uint64_t budget_bytes = 0;  // its memory: host memory counted against --gpu-mem
    double link_gbps = 8;       // each direction of the host <-> device link
    int n_threads = 1;          // CPU threads the device's ops run on
    bool int8_activations = false;  // cpu::matmul's single-level int8 activations (--int8-acts)
    // --sim-shrink-after PASSES:BYTES: at the poll_memory call that follows PASSES passes (0:
    // before anything is allocated), BYTES of its memory are taken away, as another program's
    // allocation would take them from a GPU. -1: never.
    int64_t shrink_after = -1;
    uint64_t shrink_bytes = 0;
};
std::unique_ptr<Device> make_sim_device(const SimOptions& opts);

}  // namespace strata::gpu
