#include "runtime/scheduler.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "runtime/core/error.h"
#include "runtime/core/log.h"

namespace strata {

struct Scheduler::Job {
    uint64_t id = 0;
    Request request;
    std::atomic<bool> cancelled{false};
};

Scheduler::Scheduler(Engine& engine, const SchedulerOptions& opts) : engine_(engine), opts_(opts) {
    if (opts_.max_batch < 1) throw UsageError(fmt::format("--max-batch {} must be at least 1", opts_.max_batch));
    if (opts_.max_queue < 0) throw UsageError(fmt::format("queue size {} is negative", opts_.max_queue));
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

uint64_t Scheduler::submit(Request request) {
    if (request.prompt.empty()) throw UsageError("the prompt is empty");
    if (request.params.n_predict < 0) throw UsageError(fmt::format("max tokens {} is negative", request.params.n_predict));
    const int64_t need = static_cast<int64_t>(request.prompt.size()) + 1;
    if (need > engine_.n_ctx())
        throw UsageError(fmt::format("the prompt has {} tokens, but the context holds {}", request.prompt.size(), engine_.n_ctx()),
                         "shorten the prompt or raise --ctx");
    auto job = std::make_unique<Job>();
    job->request = std::move(request);
    std::lock_guard lock(mu_);
    if (stopping_ || draining_) throw QueueFull("the scheduler is shutting down");
    if (static_cast<int>(queue_.size()) >= opts_.max_queue + opts_.max_batch)
        throw QueueFull(fmt::format("{} requests are already waiting", queue_.size()));
    job->id = next_id_++;
    const uint64_t id = job->id;
    queue_.push_back(std::move(job));
    wake_.notify_all();
    return id;
}

void Scheduler::cancel(uint64_t id) {
    std::lock_guard lock(mu_);
    cancelled_.push_back(id);
}

void Scheduler::wait_idle() {
    std::unique_lock lock(mu_);
    idle_.wait(lock, [&] { return queue_.empty() && running_ == 0; });
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
    s.running = running_;
    s.queued = static_cast<int>(queue_.size());
    return s;
}

void Scheduler::loop() {
    for (;;) {
        std::unique_ptr<Job> job;
        {
            std::unique_lock lock(mu_);
            wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
            if (queue_.empty()) return;  // stopping with nothing left
            job = std::move(queue_.front());
            queue_.pop_front();
            if (stopping_) job->cancelled = true;
            ++running_;
        }
        run_job(*job);
        {
            std::lock_guard lock(mu_);
            --running_;
        }
        idle_.notify_all();
    }
}

void Scheduler::run_job(Job& job) {
    const auto is_cancelled = [&] {
        if (job.cancelled) return true;
        std::lock_guard lock(mu_);
        if (stopping_) return job.cancelled = true;
        auto it = std::find(cancelled_.begin(), cancelled_.end(), job.id);
        if (it == cancelled_.end()) return false;
        cancelled_.erase(it);
        return job.cancelled = true;
    };
    const std::vector<int32_t>& prompt = job.request.prompt;
    GenerateResult r;
    r.prompt_tokens = prompt;
    if (is_cancelled()) {
        r.stop_reason = "cancelled";
    } else {
        // Reuse the KV of the longest common prefix with what the sequence holds; at least
        // one prompt token is evaluated, for its logits.
        const size_t common = std::mismatch(cached_.begin(), cached_.end(), prompt.begin(), prompt.end()).first - cached_.begin();
        const size_t reuse = std::min(common, prompt.size() - 1);
        engine_.truncate(static_cast<int>(reuse));
        try {
            const auto t0 = std::chrono::steady_clock::now();
            r = engine_.generate(std::span(prompt).subspan(reuse), job.request.params, [&](std::string_view text) {
                if (is_cancelled()) return false;
                return !job.request.on_text || job.request.on_text(text);
            });
            r.prompt_tokens = prompt;
            r.cached_tokens = static_cast<int>(reuse);
            cached_ = prompt;
            cached_.insert(cached_.end(), r.tokens.begin(), r.tokens.end());
            cached_.resize(std::min<size_t>(cached_.size(), engine_.n_past()));
            std::lock_guard lock(mu_);
            stats_.busy_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            stats_.prompt_tokens += prompt.size() - reuse;
            stats_.cached_tokens += reuse;
            stats_.generated_tokens += r.tokens.size();
        } catch (const std::exception& e) {
            r.stop_reason = "error";
            r.error = e.what();
            engine_.reset();
            cached_.clear();
        }
    }
    {
        std::lock_guard lock(mu_);
        ++(r.stop_reason == "error" ? stats_.requests_failed : stats_.requests_done);
    }
    if (job.request.on_done) job.request.on_done(r);
}

}  // namespace strata
