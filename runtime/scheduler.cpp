#include "runtime/scheduler.h"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <future>
#include <limits>
#include <unordered_set>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "runtime/embedding_pool.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/scheduler_job.h"

namespace strata::runtime {

namespace {
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
// A prompt is not cut into pieces shorter than this when other work fills the step.
constexpr int64_t kMinPromptChunk = 16;
}  // namespace

Scheduler::Scheduler(Engine& engine, const SchedulerOptions& opts) : engine_(engine), opts_(opts) {
    if (opts_.max_batch < 1) throw UsageError(fmt::format("--max-batch {} must be at least 1", opts_.max_batch));
    if (opts_.max_queue < 0) throw UsageError(fmt::format("queue size {} is negative", opts_.max_queue));
    if (opts_.spec.mode == SpecMode::Draft && !opts_.spec.draft_model)
        throw UsageError("--spec draft needs a draft model", "give --draft-model FILE, or use --spec lookup or self");
    if (opts_.spec.mode == SpecMode::Self && !opts_.spec.draft_model)
        throw UsageError("--spec self needs the model's first layers loaded to draft with", "open them with open_early_layers");
    if (opts_.max_batch_per_client < 0 || opts_.max_queue_per_client < 0)
        throw UsageError("a client's share of the batch or the queue is negative", "give 0 for the default share");
    STRATA_LOG_INFO("scheduler: up to {} sequences at once, {} queued; KV cache {} blocks of {} positions",
                    opts_.max_batch, opts_.max_queue, engine_.kv().pool().n_blocks(), KvCache::kBlockSize);
    publish_tiers();
    plan_prices();
    thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
}

int64_t Scheduler::check(const Request& request) const {
    if (request.prompt.empty()) throw UsageError("the prompt is empty");
    if (request.params.n_predict < 0) throw UsageError(fmt::format("max tokens {} is negative", request.params.n_predict));
    check_sampler_params(request.params.sampler);
    const int64_t n_ctx = engine_.n_ctx();
    // A request that generates takes one position past its prompt; one that only scores or
    // embeds its prompt may fill the context (perplexity's chunk of --ctx tokens, as llama.cpp's).
    if (static_cast<int64_t>(request.prompt.size()) + (request.prompt_only() ? 0 : 1) > n_ctx)
        throw UsageError(fmt::format("the prompt has {} token{}, and the context holds {}: no room is left to generate",
                                     request.prompt.size(), request.prompt.size() == 1 ? "" : "s", n_ctx),
                         "shorten the prompt or raise --ctx");
    const int64_t max_len = std::min<int64_t>(n_ctx, static_cast<int64_t>(request.prompt.size()) + request.params.n_predict);
    const int32_t need = KvCache::blocks_for(max_len), n_blocks = engine_.kv().pool().n_blocks();
    if (need > n_blocks)
        throw UsageError(fmt::format("the request needs {} KV blocks ({} positions), but the whole cache has {}", need, max_len,
                                     n_blocks),
                         "ask for fewer tokens, or give the KV cache more room");
    return max_len;
}

uint64_t Scheduler::submit(Request request) {
    const int64_t max_len = check(request);
    auto job = std::make_unique<Job>();
    job->request = std::move(request);
    job->max_len = static_cast<int32_t>(max_len);
    std::lock_guard lock(mu_);
    if (stopping_ || draining_) throw QueueFull("the scheduler is shutting down");
    // Running ones and max_queue beyond them; a new request waits in queue_ until admitted.
    if (static_cast<int>(queue_.size()) + n_running_ >= opts_.max_queue + opts_.max_batch)
        throw QueueFull(fmt::format("{} requests are running and {} waiting", n_running_, queue_.size()));
    const std::string& client = job->request.client;
    if (shares_.active(&client) > 0) {
        const int share = opts_.max_queue_per_client > 0 ? opts_.max_queue_per_client : std::max(1, opts_.max_queue / 4);
        const auto waiting = std::count_if(queue_.begin(), queue_.end(), [&](const auto& j) { return j->request.client == client; });
        if (waiting >= share)
            throw ClientQueueFull(fmt::format("this client has {} requests waiting, its share of the queue while others have work", waiting));
    }
    shares_.accepted(client);
    job->id = next_id_++;
    const uint64_t id = job->id;
    queue_.push_back(std::move(job));
    wake_.notify_all();
    return id;
}

GenerateResult Scheduler::run(Request request) {
    std::promise<GenerateResult> done;
    std::future<GenerateResult> result = done.get_future();
    request.on_done = [&done, own = std::move(request.on_done)](const GenerateResult& r) {
        if (own) own(r);
        done.set_value(r);
    };
    submit(std::move(request));
    return result.get();
}

void Scheduler::cancel(uint64_t id) {
    {
        std::lock_guard lock(mu_);
        cancelled_.push_back(id);
    }
    wake_.notify_all();
}

void Scheduler::wait_idle() {
    std::unique_lock lock(mu_);
    idle_.wait(lock, [&] { return queue_.empty() && n_running_ == 0; });
}

void Scheduler::drain() {
    {
        std::lock_guard lock(mu_);
        draining_ = true;
    }
    wait_idle();
}

SchedulerStats Scheduler::stats() const {
    std::lock_guard lock(mu_);
    SchedulerStats s = stats_;
    s.running = n_running_;
    s.queued = static_cast<int>(queue_.size());
    return s;
}

void Scheduler::take_cancellations(std::vector<std::unique_ptr<Job>>& done) {
    if (stopping_) {
        for (auto& j : running_) j->cancelled = true;
        for (auto& j : queue_) j->cancelled = true;
    }
    for (uint64_t id : cancelled_) {
        for (auto& j : running_)
            if (j->id == id) j->cancelled = true;
        for (auto& j : queue_)
            if (j->id == id) j->cancelled = true;
    }
    cancelled_.clear();
    // Cancelled queued requests end now; until their on_done has run they count as running.
    for (auto it = queue_.begin(); it != queue_.end();) {
        if (!(*it)->cancelled) {
            ++it;
            continue;
        }
        ++n_running_;
        (*it)->result.stop_reason = "cancelled";
        done.push_back(std::move(*it));
        it = queue_.erase(it);
    }
}

int32_t Scheduler::outstanding_blocks() const {
    // What the running sequences need for their context and their next token.
    int32_t n = 0;
    for (const auto& j : running_) {
        const size_t held = j->prefilling() ? j->context().size() : engine_.kv().seq_len(j->seq);
        n += engine_.kv().blocks_needed(j->seq, static_cast<int32_t>(held) + j->next_positions());
    }
    return n;
}

void Scheduler::preempt(Job& j) {
    // Its KV goes (full blocks stay cached); it waits at the head of the queue and, admitted
    // again, recomputes what the cache no longer has. Sampler and text stream carry on.
    engine_.free_seq(j.seq);
    j.seq = -1;
    if (j.next >= 0) {
        j.replay = j.request.prompt;
        j.replay.insert(j.replay.end(), j.result.tokens.begin(), j.result.tokens.end() - 1);
    }
    j.fed = 0;
    j.chunk = 0;
    j.pooled.clear();
    STRATA_LOG_INFO("scheduler: KV cache full, request {} waits again ({} positions to restore; {} preemptions so far)", j.id,
                    j.context().size(), ++preemptions_);
}

std::deque<std::unique_ptr<Scheduler::Job>>::iterator Scheduler::next_admission() {
    std::unordered_map<std::string_view, int> running;
    for (const auto& j : running_) ++running[j->request.client];
    const int share = ClientShares::batch_share(opts_.max_batch, opts_.max_batch_per_client, shares_.active());
    auto best = queue_.end();
    double best_service = 0;
    std::unordered_set<std::string_view> seen;
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
        const Request& r = (*it)->request;
        if (!seen.insert(r.client).second) continue;  // each client's requests in their order
        if (r.after_prefill_of && prefilling(r.after_prefill_of)) continue;
        if (running[r.client] >= share) continue;
        const double service = shares_.service(r.client);
        if (best == queue_.end() || service < best_service) {
            best = it;
            best_service = service;
        }
    }
    return best;
}

void Scheduler::admit() {
    KvCache& kv = engine_.kv();
    while (static_cast<int>(running_.size()) < opts_.max_batch) {
        const auto next = next_admission();
        if (next == queue_.end()) return;
        Job& j = **next;
        const auto& prompt = j.context();
        const SeqId seq = engine_.create_seq();
        // Pooling over every token, or scoring it, needs every token's outputs: nothing is attached.
        const bool attach = (!j.request.embed || *j.request.embed == Pooling::Last) && !j.request.on_prompt_logits;
        int cached = attach ? engine_.attach_prefix(seq, prompt) : 0;
        if (cached > 0 && j.request.own_prefix && engine_.copies_blocks()) cached = engine_.unshare(seq);
        // Admitted when its context and first token fit beside what the running sequences
        // need for their next token; when they grow past the pool, the youngest is preempted.
        if (kv.pool().n_free() - outstanding_blocks() < kv.blocks_needed(seq, static_cast<int32_t>(prompt.size()) + j.next_positions())) {
            engine_.free_seq(seq);
            STRATA_ASSERT(!running_.empty() && "a request the pool can hold did not fit an empty pool");
            return;
        }
        j.seq = seq;
        j.fed = static_cast<size_t>(cached);
        ++n_running_;
        running_.push_back(std::move(*next));
        queue_.erase(next);
        if (j.started != Clock::time_point{}) continue;  // resumed after a preemption
        j.result.prompt_tokens = prompt;
        j.result.cached_tokens = cached;
        j.result.stop_reason = "length";
        if (!j.request.embed)
            j.generation = std::make_unique<Generation>(j.request.params, engine_.tokenizer(), engine_.make_sampler(j.request.params),
                                                        prompt, j.result, j.request.on_text, j.request.on_logprobs);
        start_speculation(j);
        shares_.admitted(j.request.client);
        j.started = Clock::now();
        stats_.cached_tokens += static_cast<uint64_t>(cached);
    }
}

bool Scheduler::prefilling(uint64_t id) const {
    for (const auto& j : queue_)
        if (j->id == id) return true;
    for (const auto& j : running_)
        if (j->id == id) return j->prefilling();
    return false;
}

void Scheduler::loop() {
    for (;;) {
        std::vector<std::unique_ptr<Job>> done;
        {
            std::unique_lock lock(mu_);
            if (queue_.empty() && running_.empty()) shares_.forget();
            wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || !running_.empty() || !cancelled_.empty(); });
            take_cancellations(done);
            if (stopping_ && queue_.empty() && running_.empty() && done.empty()) return;
            if (!stopping_) admit();
        }
        // Cancelled sequences leave before the pass: their KV is freed at once.
        for (auto& j : running_)
            if (j->cancelled) {
                j->result.stop_reason = "cancelled";
                done.push_back(std::move(j));
            }
        std::erase(running_, nullptr);
        if (!running_.empty()) step(done);
        finish(done);
        publish_tiers();
    }
}

int32_t Scheduler::make_room() {
    // Blocks this step needs at most: each prefilling sequence's whole context, one more
    // position for each decoding one.
    KvCache& kv = engine_.kv();
    for (;;) {
        int32_t need = 0;
        for (const auto& j : running_) {
            const size_t upto = j->prefilling() ? j->context().size() : kv.seq_len(j->seq) + j->next_positions();
            need += kv.blocks_needed(j->seq, static_cast<int32_t>(upto));
        }
        if (need <= kv.pool().n_free()) return kv.pool().n_free() - need;
        STRATA_ASSERT(running_.size() > 1 && "a request the pool can hold did not fit it alone");
        std::unique_ptr<Job> victim = std::move(running_.back());
        running_.pop_back();
        preempt(*victim);
        std::lock_guard lock(mu_);
        --n_running_;
        queue_.push_front(std::move(victim));
    }
}

void Scheduler::step(std::vector<std::unique_ptr<Job>>& done) {
    // One decode token per generating sequence, then prompt chunks least-served client first,
    // up to Backend::kMaxUbatch tokens in all. While clients share, no chunk takes more than an
    // equal part of a step, a light client's decode steps stay cheap (ClientShares::may_join),
    // and a much lighter client's sequences run alone (ClientShares::light).
    const int32_t spare = make_room();
    std::vector<SeqTokens> batch;
    std::vector<Job*> owners;
    int64_t budget = Backend::kMaxUbatch, chunk_limit = Backend::kMaxUbatch;
    bool shared = false;
    std::vector<std::pair<double, Job*>> prompts;  // with their client's service
    double lightest_decoder = std::numeric_limits<double>::infinity();
    {
        std::lock_guard lock(mu_);
        const size_t clients = shares_.active();
        shared = clients > 1;
        if (shared) chunk_limit = std::max<int64_t>(kMinPromptChunk, Backend::kMaxUbatch / static_cast<int64_t>(clients));
        std::vector<std::string_view> running;
        for (const auto& j : running_) running.push_back(j->request.client);
        const auto light = shared ? shares_.light(running) : std::nullopt;
        for (auto& j : running_) {
            j->chunk = 0;
            const double service = shares_.service(j->request.client);
            if (light && j->request.client != *light && j->waited < ClientShares::kMaxWaitSteps) {
                ++j->waited;  // it sits out this step
                continue;
            }
            if (j->prefilling()) {
                prompts.emplace_back(service, j.get());
                continue;
            }
            j->waited = 0;
            lightest_decoder = std::min(lightest_decoder, service);
            batch.push_back({j->seq, {&j->next, 1}, PassOutput::Logits, {}, false, cpu::AttentionRows::Decode});
            owners.push_back(j.get());
            --budget;
        }
    }
    budget -= add_drafts(batch, owners, spare, budget);
    std::stable_sort(prompts.begin(), prompts.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [service, j] : prompts) {
        const auto& prompt = j->context();
        // A preempted request's replayed reply goes apart from its prompt, as generated rows
        // (the bits its tokens had when first decoded).
        const auto own = static_cast<int64_t>(j->request.prompt.size());
        const bool replayed_reply = static_cast<int64_t>(j->fed) >= own;
        int64_t left = static_cast<int64_t>(prompt.size() - j->fed);
        if (!replayed_reply) left = std::min(left, own - static_cast<int64_t>(j->fed));
        const int64_t take = std::min({left, budget, chunk_limit});
        if (take <= 0 || (take < left && take < kMinPromptChunk && !batch.empty())) continue;
        if (shared && j->waited < ClientShares::kMaxWaitSteps &&
            !ClientShares::may_join(Backend::kMaxUbatch - budget, take, service, lightest_decoder)) {
            ++j->waited;
            continue;
        }
        j->waited = 0;
        j->chunk = static_cast<size_t>(take);
        batch.push_back({j->seq, std::span(prompt).subspan(j->fed, j->chunk), j->output(), {}, false,
                         replayed_reply ? cpu::AttentionRows::Decode : cpu::AttentionRows::Prompt});
        owners.push_back(j);
        budget -= take;
    }
    if (batch.empty()) return;

    const auto t0 = Clock::now();
    std::span<const float> logits;
    try {
        logits = engine_.eval_batch(batch);
    } catch (const std::exception& e) {
        STRATA_LOG_ERROR("scheduler: a forward pass over {} sequences failed: {}", batch.size(), e.what());
        // Strata's errors carry a way out: it goes with the message.
        const auto* error = dynamic_cast<const Error*>(&e);
        const std::string why = error && !error->hint().empty() ? fmt::format("{} ({})", e.what(), error->hint()) : e.what();
        for (Job* j : owners) {
            j->result.stop_reason = "error";
            j->result.error = why;
            j->finished = true;
        }
        logits = {};
    }
    const double busy = seconds_since(t0);
    uint64_t prompt_tokens = 0;
    const int64_t V = engine_.hparams().n_vocab, E = engine_.hparams().n_embd;
    int64_t row = 0;  // the entry's first row of logits (Backend::eval_batch)
    for (size_t i = 0; i < owners.size() && !logits.empty(); row += Backend::logit_rows(batch[i]), ++i) {
        Job& j = *owners[i];
        // Its last token's logits: what the next token is drawn from.
        const std::span<const float> last = logits.subspan((row + Backend::logit_rows(batch[i]) - 1) * V, V);
        if (j.chunk > 0) {
            if (j.request.on_prompt_logits) j.request.on_prompt_logits(j.fed, logits.subspan(row * V, j.chunk * V));
            j.fed += j.chunk;
            prompt_tokens += j.chunk;
            if (j.request.embed) {
                pool(j, engine_.batch_hidden().subspan(i * E, E));
                continue;
            }
            if (j.prefilling()) continue;  // more to come
            if (!j.replay.empty()) {  // resumed: its pending token is next
                j.replay.clear();
                j.fed = j.request.prompt.size();
                continue;
            }
            j.result.prefill_seconds = seconds_since(j.started);
            j.first_token = Clock::now();
            j.finished = !feed(j, last);
            continue;
        }
        ++j.result.n_decode_evals;
        j.finished = !feed(j, logits.subspan(row * V, Backend::logit_rows(batch[i]) * V), row);
    }
    price_pass(batch, owners, busy, !logits.empty());
    {
        std::lock_guard lock(mu_);
        stats_.busy_seconds += busy;
        stats_.prompt_tokens += prompt_tokens;
        for (const Job* j : owners) shares_.served(j->request.client, j->chunk > 0 ? static_cast<int64_t>(j->chunk) : 1);
        shares_.end_step();
    }
    for (auto& j : running_)
        if (j->finished) done.push_back(std::move(j));
    std::erase(running_, nullptr);
}

void Scheduler::pool(Job& j, std::span<const float> hidden) {
    pool_chunk(j.pooled, *j.request.embed, j.fed == j.chunk, hidden);
    if (j.prefilling()) return;
    j.result.embedding = unit_length(j.pooled);
    j.result.stop_reason = "stop";
    if (std::any_of(j.pooled.begin(), j.pooled.end(), [](float v) { return std::isnan(v); })) {
        j.result.embedding.clear();
        j.result.stop_reason = "error";
        j.result.error = kNanOutput;
    }
    j.result.prefill_seconds = seconds_since(j.started);
    j.finished = true;
}

void Scheduler::finish(std::vector<std::unique_ptr<Job>>& done) {
    for (auto& j : done) {
        GenerateResult& r = j->result;
        if (j->seq >= 0) engine_.free_seq(j->seq);
        j->spec.reset();  // its drafter's own sequence (a draft model's KV) goes before it is answered
        if (j->generation) {  // it has run (it may wait again after a preemption)
            j->generation->finish();
            if (j->first_token != Clock::time_point{}) r.decode_seconds = seconds_since(j->first_token);
        } else {
            r.prompt_tokens = j->request.prompt;
        }
        {
            std::lock_guard lock(mu_);
            ++(r.stop_reason == "error" ? stats_.requests_failed : stats_.requests_done);
            stats_.generated_tokens += r.tokens.size();
            stats_.decode_passes += uint64_t(r.n_decode_evals);
            stats_.drafted_tokens += uint64_t(r.n_drafted);
            stats_.accepted_tokens += uint64_t(r.n_accepted);
        }
        if (j->request.on_done) j->request.on_done(r);
        {
            std::lock_guard lock(mu_);
            --n_running_;
            shares_.done(j->request.client);
        }
        idle_.notify_all();
    }
}

}  // namespace strata::runtime
