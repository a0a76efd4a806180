#pragma once
// What computes the forward pass: the CPU (runtime/exec/cpu/cpu_backend.h) or a device, CUDA
// or simulated (runtime/exec/device/device_backend.h), each running the layer program
// (runtime/exec/layer_program.h). This base turns eval_batch requests into passes of up to
// kMaxUbatch tokens of several sequences laid out in the paged KV cache (PassLayout); a backend
// computes each pass and the logits of the rows asked for.
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "cpu/attention_cpu.h"
#include "cpu/matmul.h"
#include "models/hparams.h"
#include "runtime/exec/draft_rows.h"
#include "runtime/kv/kv_cache.h"

namespace strata { class Trace; }

namespace strata::runtime {

// What a batch entry wants back from its pass: its last token's logits, or final hidden
// states (after the output norm, before the head) to pool into an embedding.
enum class PassOutput : uint8_t {
    Logits,       // n_vocab logits of its last token
    AllLogits,    // n_vocab logits of each of its tokens (scoring a text: perplexity)
    // n_vocab logits of each of its tokens, each row computed as a decode step computes it
    // alone (verifying draft tokens: runtime/spec/), all in one pass (at most kMaxUbatch tokens)
    Verify,
    LastHidden,   // the hidden state of its last token
    FirstHidden,  // of its first token
    SumHidden,    // the sum over all its tokens
};
class RoutingStats;

// One sequence's share of a pass: `tokens` appended after its last position. A Verify entry
// may be a draft tree: token i's parent is parent[i] (-1 for the first, the token after the
// sequence's last position), its rows laid out as DraftRows says, each seeing its ancestors
// only. A tree that is not a chain is not committed to the sequence: the caller keeps the path
// it accepts (KvCache::keep_path).
struct SeqTokens {
    SeqId seq = 0;
    std::span<const int32_t> tokens;
    PassOutput output = PassOutput::Logits;
    std::span<const int32_t> parent = {};  // empty: a chain
    // A Verify entry's rows past its likeliest path may be left out of the pass's head, for
    // Backend::head_deferred to compute as its verification reaches them.
    bool defer_head = false;
    // A prompt's tokens, or generated ones (a decode step's, a verify pass's drafts, a preempted
    // request's replayed reply): attention computes the first as a prompt pass would and the
    // others as their decode steps would, whatever the pass holds, so a row's bits do not depend
    // on how it was batched or cached. ByCount (callers that do not say): by the pass's size.
    cpu::AttentionRows rows = cpu::AttentionRows::ByCount;

    // KV positions the entry writes after the sequence's last one.
    int64_t kv_span() const { return parent.empty() ? static_cast<int64_t>(tokens.size()) : draft_span(parent); }
};

// One pass: tokens of several sequences, each at its own positions, and where their keys and
// values go in the KV cache.
struct PassLayout {
    // A run of one sequence's tokens inside the pass.
    struct Segment {
        SeqId seq;
        int64_t pos0;   // position of its first token
        int64_t first;  // its first token's row in the pass
        int64_t n;
        int32_t draft = -1;  // a draft tree's rows: drafts[draft]; -1: positions pos0, pos0 + 1, ...
        cpu::AttentionRows rows = cpu::AttentionRows::ByCount;  // SeqTokens::rows
    };
    std::span<const int32_t> tokens;
    std::vector<Segment> segments;
    std::vector<DraftRows> drafts;        // the layouts of the draft trees that are not chains
    std::vector<int64_t> pos;             // per token: its position
    std::vector<int32_t> block, row;      // per token: the KV block and the row in it
    std::vector<int32_t> dirty;           // blocks the pass writes, ascending
    int64_t n_long = 0;  // rows of the segments of more than kDecodeRows tokens, which come first

    int64_t n() const { return static_cast<int64_t>(tokens.size()); }
    // KV slots segment `s` writes from its first position on: its tree's span, or its tokens.
    int64_t span(const Segment& s) const { return s.draft >= 0 ? drafts[size_t(s.draft)].span : s.n; }
};

class Backend {
public:
    virtual ~Backend() = default;
    Backend(const Backend&) = delete;
    Backend& operator=(const Backend&) = delete;

    virtual std::string_view name() const = 0;  // "cpu", "cuda:0", "sim"
    // Records the backend's own work into `trace` (may be null) where it has any of its own.
    virtual void set_trace(Trace* trace) {}
    // How often each expert was chosen, for a mixture-of-experts model on a backend that counts it.
    virtual const RoutingStats* routing_stats() const { return nullptr; }
    // Device memory in use and its budget (--gpu-mem, less what was taken away since); zeros
    // on the CPU. When memory was taken away: how often, the layers moved to the CPU and the
    // held routed experts given back to it.
    struct DeviceMemory {
        uint64_t used = 0, budget = 0;
        uint64_t losses = 0;
        int layers_moved = 0;
        int experts_given_back = 0;
        uint64_t expert_choices = 0;  // routed choices (a token's, to one expert) the held experts computed
        uint64_t offloaded_expert_choices = 0;  // and those op offload computed there in prompts' passes
    };
    virtual DeviceMemory device_memory() const { return {}; }
    // The routed experts the device holds now, per layer (empty: none, or no device).
    virtual std::vector<std::vector<int32_t>> device_experts() const { return {}; }

    // Runs every entry's tokens (entries name distinct sequences) in passes of up to
    // kMaxUbatch tokens, each after its sequence's last position, and writes n_vocab logits
    // (logit_rows of them per entry, in entry order: a Logits entry's last token, each token of
    // an AllLogits entry) and one row of n_embd floats of hidden state per entry (the rows of
    // the other kind are zero). The blocks must be reserved (KvCache::reserve): throws
    // UsageError otherwise. A token's outputs do not depend on the other tokens of its pass
    // (see the backends). The caller runs it inside the thread pool's arena.
    void eval_batch(std::span<const SeqTokens> batch, KvCache& kv, std::vector<float>& logits, std::vector<float>& states);
    // The same when every entry asks for logits.
    void eval_batch(std::span<const SeqTokens> batch, KvCache& kv, std::vector<float>& logits) {
        std::vector<float> states;
        eval_batch(batch, kv, logits, states);
    }

    // Where the backend defers the head (defers_verify_head), a Verify entry with defer_head in
    // eval_batch's last pass has logits only for the rows of its likeliest path (its first guess at each node, the
    // first kDecodeRows rows of it); its other rows stay zero until computed here, on demand, as
    // eval_batch would have computed them (a verified path rarely needs them, and each row of the
    // head costs a pass over the output matrix). `logit_rows` in eval_batch's numbering; rows not
    // deferred are left as they are. Valid until the next eval_batch.
    void head_deferred(std::span<const int64_t> logit_rows, std::vector<float>& logits);
    bool deferred(int64_t logit_row) const;

    // Rows of logits eval_batch writes for `e`.
    static int64_t logit_rows(const SeqTokens& e) {
        return e.output == PassOutput::AllLogits || e.output == PassOutput::Verify ? static_cast<int64_t>(e.tokens.size()) : 1;
    }

    // Whether a pass over `kv` verifies draft trees; where it does not, only chains (a tree
    // throws UsageError). Every backend's attention follows a tree's mask (the CPU's, the
    // devices'), and every layer's keys and values follow the kept path: in DRAM at once, in a
    // device's cache (keep_path below), spilled to disk when the layer is next begun (every
    // backend begins a host layer before it reads it). Not where layers rebuild their KV from
    // saved hidden states: those keep a position's input, not its keys and values, and a kept
    // row's input would have to move in step with the rows rebuilt from it.
    static bool verifies_trees(const KvCache& kv) { return kv.n_rebuilt() == 0; }
    // After a pass that verified `seq`'s draft tree, before KvCache::keep_path(seq, slots, ...):
    // the keys and values the backend holds of its own (a device's cache) move as that call
    // moves the cache's.
    virtual void keep_path(const KvCache& kv, SeqId seq, std::span<const int64_t> slots) {}
    // After KvCache::unshare: the blocks it copied, copied as well where the backend holds
    // keys and values (or saved hidden states) of its own.
    virtual void copy_blocks(std::span<const KvCache::BlockCopy> copies) {}

    static constexpr int64_t kMaxUbatch = 256;  // tokens per pass: bounds activation memory
    // Segments of at most this many tokens, and Verify entries, are decode steps: the CPU runs
    // their matmuls as GEMVs, a few rows at a time (runtime/exec/cpu/pass_matmul.h).
    static constexpr int64_t kDecodeRows = cpu::kDecodeTokens;

protected:
    explicit Backend(const models::Hparams& hp) : hp_(hp) {}
    // Sizes the activations for passes of up to n tokens.
    virtual void reserve(int64_t n_tokens) = 0;
    // Computes one pass and writes its keys and values; the final hidden states of its tokens
    // stay for head().
    virtual void compute(const PassLayout& pass, KvCache& kv) = 0;
    // logits rows = output head of the hidden states of the last pass's `rows`: the first
    // n_long as one product (a prompt's rows), each of the others as its sequence alone would
    // compute it (a single row).
    virtual void head(std::span<const int64_t> rows, float* logits, int64_t n_long) = 0;
    // out rows = the final hidden states (output norm applied) of the last pass's `rows`.
    virtual void hidden(std::span<const int64_t> rows, float* out) = 0;
    // Whether head() may be called for the last pass's rows after eval_batch returned, its final
    // hidden states kept until the next pass (head_deferred).
    virtual bool defers_verify_head() const { return false; }

    const models::Hparams& hp_;

private:
    void check(std::span<const int32_t> tokens) const;
    // Lays out one pass over `tokens` (at most kMaxUbatch), computes it and commits it to kv
    // (draft trees excepted); its first n_long rows are those of long segments; trees[i]:
    // segment i's draft tree, empty for none or a chain.
    void pass(std::span<const int32_t> tokens, std::span<const PassLayout::Segment> segments,
              std::span<const std::span<const int32_t>> trees, int64_t n_long, KvCache& kv);

    PassLayout layout_;
    std::vector<std::pair<int64_t, int64_t>> deferred_;  // (row of logits, row of the last pass) not yet computed
};

}  // namespace strata::runtime
