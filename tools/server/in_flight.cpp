#include "tools/server/in_flight.h"

#include <fmt/format.h>

#include "core/error.h"
#include "tools/openai/api_error.h"
#include "tools/server/peer_socket.h"

namespace strata::server {

InFlight::InFlight(ServerState& state, std::shared_ptr<LoadedModel> model, std::vector<uint64_t> ids, int fd)
    : state_(state), model_(std::move(model)), ids_(std::move(ids)), fd_(fd) {
    for (uint64_t id : ids_) state_.track(*model_->scheduler, id);
}

InFlight::~InFlight() {
    for (uint64_t id : ids_) {
        if (!finished_) model_->scheduler->cancel(id);
        state_.untrack(*model_->scheduler, id);
    }
}

bool InFlight::await(const std::function<bool()>& step) {
    for (;;) {
        if (step()) return true;
        if (peer_closed(fd_)) {
            cancel();
            return false;
        }
    }
}

bool InFlight::await_all(Generation& gen) {
    if (!await([&] {
            gen.wait(kPoll);
            return gen.all_done();
        }))
        return false;
    finished();
    return true;
}

void InFlight::cancel() {
    for (uint64_t id : ids_) model_->scheduler->cancel(id);
    state_.metrics.count_cancelled();
}

std::shared_ptr<InFlight> submit_all(ServerState& state, const std::shared_ptr<LoadedModel>& model,
                                     std::vector<runtime::Request> requests, bool share_prompt, const std::string& client) {
    runtime::Scheduler& scheduler = *model->scheduler;
    // More choices than the scheduler ever holds at once would be refused as busy forever.
    const runtime::SchedulerOptions& so = scheduler.options();
    if (const int most = so.max_batch + so.max_queue; static_cast<int>(requests.size()) > most)
        throw openai::invalid_request(fmt::format("{} sequences asked at once, and this server holds at most {} ({} running, {} "
                                                  "waiting: --max-batch and --max-queue)",
                                                  requests.size(), most, so.max_batch, so.max_queue),
                                      requests.size() > 1 && share_prompt ? "n" : "input");
    std::vector<uint64_t> ids;
    try {
        for (runtime::Request& r : requests) {
            if (share_prompt && !ids.empty()) r.after_prefill_of = ids.front();
            r.client = client;
            ids.push_back(scheduler.submit(std::move(r)));
        }
    } catch (const runtime::ClientQueueFull& e) {
        for (uint64_t id : ids) scheduler.cancel(id);
        state.metrics.count_rejected("client_queue");
        throw openai::ApiError(429, std::string("too many requests from this address: ") + e.what() + "; retry later",
                               "rate_limit_error", {}, "too_many_requests_from_client");
    } catch (const runtime::QueueFull& e) {
        for (uint64_t id : ids) scheduler.cancel(id);
        state.metrics.count_rejected("queue_full");
        throw openai::ApiError(503, std::string("the server is busy: ") + e.what() + "; retry later", "server_error", {}, "queue_full");
    } catch (const UsageError& e) {
        for (uint64_t id : ids) scheduler.cancel(id);
        throw openai::invalid_request(e.what(), {}, "context_length_exceeded");
    }
    return std::make_shared<InFlight>(state, model, std::move(ids), current_connection_socket());
}

Submitted submit_completion(ServerState& state, const std::shared_ptr<LoadedModel>& model, const openai::CompletionRequest& creq,
                            const std::string& client) {
    auto gen = std::make_shared<Generation>(creq.n);
    std::vector<runtime::Request> requests;
    for (int i = 0; i < creq.n; ++i) {
        runtime::GenerateParams params = creq.params;
        params.sampler.seed += static_cast<uint64_t>(i);  // seeded choices differ, and repeat
        requests.push_back(Generation::request(gen, i, creq.prompt, std::move(params)));
    }
    return {gen, submit_all(state, model, std::move(requests), /*share_prompt=*/true, client)};
}

const runtime::GenerateResult* failed(const std::vector<runtime::GenerateResult>& results) {
    for (const auto& r : results)
        if (r.stop_reason == "cancelled" || r.stop_reason == "error") return &r;
    return nullptr;
}

openai::ApiError result_error(const runtime::GenerateResult& r) {
    if (r.stop_reason == "cancelled")
        return openai::ApiError(503, "the request was cancelled: the server is shutting down (--shutdown-timeout)", "server_error", {},
                                "server_shutting_down");
    return openai::ApiError(500, "generation failed: " + r.error, "server_error", {}, "generation_failed");
}

std::optional<std::vector<runtime::GenerateResult>> stream_one_reply(ServerState& state, const Submitted& s,
                                                                     const openai::CompletionRequest& creq,
                                                                     std::chrono::steady_clock::time_point arrived,
                                                                     const std::function<bool(const openai::ReplyStream::Delta&)>& forward) {
    openai::ReplyStream reply(creq);
    bool ok = true, any_text = false;
    const bool answered = s.flight->await([&] {
        for (const Generation::Update& u : s.gen->wait(kPoll)) {
            const openai::ReplyStream::Delta d = reply.next(u.text, u.done, u.cut);
            if (!d.content.empty() || !d.calls.empty() || !d.reasoning.empty()) {
                if (!any_text)
                    state.metrics.observe_first_token(std::chrono::duration<double>(std::chrono::steady_clock::now() - arrived).count());
                any_text = true;
                if (!forward(d)) {
                    ok = false;
                    return true;
                }
            }
            if (u.done) return true;
        }
        return false;
    });
    if (!answered || !ok) {
        if (answered) s.flight->cancel();  // a write failed: the client is gone
        return std::nullopt;
    }
    s.flight->finished();
    return s.gen->results();
}

}  // namespace strata::server
