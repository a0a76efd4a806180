#pragma once
// Continuous batching, the one generation loop of every command (generate, chat, serve, batch,
// embed, perplexity, bench): requests from any thread join a queue; one scheduler thread
// admits them while the KV budget allows, and each step runs one forward pass over the weights
// for every running sequence (prompt chunks and next tokens together), so streamed weights are
// read once per step for the whole batch. Each sequence's tokens are drawn and its end decided
// by its Generation (runtime/generation.h).
// Finished or cancelled sequences leave at once and waiting ones take their place.
// Requests carry a client key: when several clients have work, each runs at most its share
// of the batch, waits at most its share of the queue, and the least-served client's requests
// are admitted and get their prompt chunks first, and a much lighter client's sequences have
// steps of their own while the others sit out a few steps (runtime/client_shares.h).
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "runtime/client_shares.h"
#include "runtime/engine.h"
#include "runtime/generation.h"
#include "runtime/spec/speculation.h"

namespace strata::runtime {

struct Request {
    std::vector<int32_t> prompt;  // already templated and tokenized
    GenerateParams params;
    // Who asked (the server: the peer's address); requests with the same key share one
    // client's share of the batch and the queue.
    std::string client;
    // An embedding request: the prompt's final hidden states pooled this way and normalised
    // (GenerateResult::embedding) instead of generated tokens.
    std::optional<Pooling> embed;
    // Admitted only once that request (submitted before) has its prompt in the KV cache, so
    // that this one attaches its blocks instead of computing them again (n choices of a prompt).
    uint64_t after_prefill_of = 0;
    // Its sequence copies the cached blocks it attaches where another sequence holds them
    // (Engine::unshare), so that it reads and moves KV of its own: a batch at one depth filled
    // by one prefill (`strata bench -d`). Ignored where the engine cannot copy blocks.
    bool own_prefix = false;
    // Each piece of text as soon as it is ready (stop strings held back), on the scheduler's
    // thread: keep it short. Returning false cancels the request.
    std::function<bool(std::string_view)> on_text;
    // With params.n_logprobs >= 0: each generated token's log-probabilities, before its text.
    std::function<void(const SampledLogprobs&)> on_logprobs;
    // Scoring a text (perplexity): every prompt token's n_vocab logits, handed over chunk by
    // chunk as the passes compute them (`first`: the chunk's first prompt position; `rows`:
    // n_vocab floats per token), on the scheduler's thread. Such a prompt is always computed
    // (no cached prefix is attached).
    std::function<void(size_t first, std::span<const float> rows)> on_prompt_logits;
    // Exactly once per accepted request, on the scheduler's thread: finished, cancelled
    // (stop_reason "cancelled") or failed (stop_reason "error", GenerateResult::error says why).
    std::function<void(const GenerateResult&)> on_done;

    // It only scores or embeds its prompt: it takes no position past it, and may fill the context.
    bool prompt_only() const { return params.n_predict == 0 && (on_prompt_logits || embed); }
};

struct SchedulerOptions {
    int max_batch = 8;    // sequences running at once
    int max_queue = 256;  // requests waiting beyond those; more are refused (QueueFull)
    // While another client has work or was served lately: the sequences one client may run
    // (0: an equal share, max_batch / clients, at least 1) and the requests it may have waiting
    // (0: a quarter of max_queue, at least 1; more are refused with ClientQueueFull). A client
    // alone may use the whole batch and queue. One sequence each keeps the steps a light client
    // shares small: on a CPU a pass of up to cpu::kDecodeTokens tokens costs little more than one.
    int max_batch_per_client = 1;
    int max_queue_per_client = 0;
    // Speculative decoding of each generating request (runtime/spec/speculation.h).
    SpecOptions spec;
};

struct SchedulerStats {
    int running = 0;
    int queued = 0;
    uint64_t requests_done = 0;
    uint64_t requests_failed = 0;
    uint64_t prompt_tokens = 0;     // evaluated (cached prefix tokens not included)
    uint64_t cached_tokens = 0;     // prompt tokens whose KV was reused
    uint64_t generated_tokens = 0;
    uint64_t decode_passes = 0;     // decoding passes of finished requests (a pass of a batch counts once per sequence)
    uint64_t drafted_tokens = 0;    // draft tokens those passes verified
    uint64_t accepted_tokens = 0;   // of which the target kept these
    double busy_seconds = 0;        // time spent in forward passes
    TierGauges tiers;               // as the last step left them
    // The counters alone (running, queued and the tiers' gauges zero): what an unloaded model's
    // scheduler leaves to a server's totals.
    SchedulerStats counters() const {
        SchedulerStats c = *this;
        c.running = c.queued = 0;
        c.tiers = tiers.counters();
        return c;
    }
    // Another scheduler's, added (a server's models together).
    SchedulerStats& operator+=(const SchedulerStats& o) {
        running += o.running, queued += o.queued;
        requests_done += o.requests_done, requests_failed += o.requests_failed;
        prompt_tokens += o.prompt_tokens, cached_tokens += o.cached_tokens, generated_tokens += o.generated_tokens;
        decode_passes += o.decode_passes, drafted_tokens += o.drafted_tokens, accepted_tokens += o.accepted_tokens;
        busy_seconds += o.busy_seconds;
        tiers += o.tiers;
        return *this;
    }
};

// Thrown by submit when max_queue requests already wait; the caller may retry later.
class QueueFull : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Thrown by submit when the request's client already has its share of the queue waiting
// while other clients have work; the caller may retry later.
class ClientQueueFull : public QueueFull {
public:
    using QueueFull::QueueFull;
};

class Scheduler {
public:
    Scheduler(Engine& engine, const SchedulerOptions& opts);
    ~Scheduler();  // cancels what is still queued or running (their on_done is called) and joins
    Scheduler(const Scheduler&) = delete;
    Scheduler& operator=(const Scheduler&) = delete;

    // Throws UsageError when the request can never run: an empty prompt, a negative token
    // count, sampling parameters no sampler can use (check_sampler_params), a prompt past the
    // context, a KV need above the whole budget. Returns the positions it may fill.
    int64_t check(const Request& request) const;
    // Thread-safe. Returns the request's id. Throws as check does, and QueueFull when the queue
    // is full; on_done is not called then.
    uint64_t submit(Request request);
    // Submits `request` and waits for its end (its own on_done runs first): its result. Throws
    // as submit does.
    GenerateResult run(Request request);
    // Thread-safe; unknown or finished ids are ignored. The request ends "cancelled".
    void cancel(uint64_t id);
    // Blocks until nothing is queued or running.
    void wait_idle();
    // Stop admitting (submit throws QueueFull) and let running and queued requests finish.
    void drain();
    SchedulerStats stats() const;
    const SchedulerOptions& options() const { return opts_; }

private:
    struct Job;
    void loop();
    // Under mu_: moves cancelled ids onto their jobs, finishes queued ones.
    void take_cancellations(std::vector<std::unique_ptr<Job>>& done);
    // Under mu_: admits queued requests while the batch and the KV pool have room.
    void admit();
    // Under mu_: the queued job to admit next: the first waiting request of the least-served
    // client still under its share of the batch; queue_.end() when none may start.
    std::deque<std::unique_ptr<Job>>::iterator next_admission();
    // Under mu_: request `id` waits in the queue or is still reading its prompt.
    bool prefilling(uint64_t id) const;
    // An embedding job's share of a pass's hidden states; its result once the prompt is read.
    void pool(Job& job, std::span<const float> hidden);
    // One forward pass over every running sequence; finished jobs move to `done`.
    void step(std::vector<std::unique_ptr<Job>>& done);
    // The job's next tokens from its rows of logits (one, or one per token of its pass with
    // drafts: those the target keeps, then its own); false: the job is finished
    // (runtime/scheduler_spec.cpp, as the three below). `first_row`: the rows' first in the
    // engine's last eval_batch, whose left-out rows are computed as the path reaches them (-1: none left out).
    bool feed(Job& job, std::span<const float> rows, int64_t first_row = -1);
    // The plan's price of a decoding pass at each row count, until passes are measured.
    void plan_prices();
    // A generating job's drafter, when the options and the request let it speculate.
    void start_speculation(Job& job);
    // Draft tokens for the decoding entries of `batch` (owned by `owners`), within `spare` KV
    // blocks and `budget` tokens: each entry that drafts becomes a Verify entry of its job's
    // tokens. Returns the tokens added.
    int64_t add_drafts(std::vector<SeqTokens>& batch, const std::vector<Job*>& owners, int32_t spare, int64_t budget);
    // Records what a decoding pass (no prompt in it) of these rows took, for the drafts' depths.
    void price_pass(const std::vector<SeqTokens>& batch, const std::vector<Job*>& owners, double seconds, bool ok);
    void finish(std::vector<std::unique_ptr<Job>>& done);
    int32_t outstanding_blocks() const;
    // Preempts the youngest sequences until the next step's KV fits the pool; the blocks to spare.
    int32_t make_room();
    void preempt(Job& job);
    // The engine's tier gauges for stats(), read on the thread that runs the passes (their counters
    // are its); after layers or held experts left the device, or the run left it, speculation's
    // planned prices are made again for the placement as it runs (Engine::predict).
    void publish_tiers() {
        const TierGauges tiers = engine_.gauges();
        if (tiers.gpu_layers_moved != priced_moves_ || tiers.gpu_experts_given_back != priced_experts_back_ ||
            tiers.gpu_left != priced_left_) {
            priced_moves_ = tiers.gpu_layers_moved;
            priced_experts_back_ = tiers.gpu_experts_given_back;
            priced_left_ = tiers.gpu_left;
            plan_prices();
        }
        std::lock_guard lock(mu_);
        stats_.tiers = tiers;
    }
    // Layers moved off the device, held experts given back, and whether the run had left the
    // device, when the pass prices were planned.
    int32_t priced_moves_ = 0, priced_experts_back_ = 0;
    bool priced_left_ = false;

    Engine& engine_;
    SchedulerOptions opts_;
    mutable std::mutex mu_;
    std::condition_variable wake_, idle_;
    std::deque<std::unique_ptr<Job>> queue_;
    std::vector<std::unique_ptr<Job>> running_;  // admitted; touched by the scheduler thread only
    std::vector<uint64_t> cancelled_;
    uint64_t next_id_ = 1;
    bool stopping_ = false, draining_ = false;
    int n_running_ = 0;  // admitted or ending, until their on_done has returned
    SchedulerStats stats_;
    ClientShares shares_;  // under mu_
    uint64_t preemptions_ = 0;  // scheduler thread only
    PassPrices prices_;         // scheduler thread only
    std::thread thread_;
};

}  // namespace strata::runtime
