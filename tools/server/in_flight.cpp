#include "tools/server/in_flight.h"

#include "core/error.h"
#include "tools/openai/api_error.h"
#include "tools/server/peer_socket.h"

namespace strata::server {

InFlight::InFlight(ServerState& state, std::vector<uint64_t> ids, int fd) : state_(state), ids_(std::move(ids)), fd_(fd) {
    for (uint64_t id : ids_) state_.track(id);
}

InFlight::~InFlight() {
    for (uint64_t id : ids_) {
        if (!finished_) state_.scheduler.cancel(id);
        state_.untrack(id);
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

void InFlight::cancel() {
    for (uint64_t id : ids_) state_.scheduler.cancel(id);
    state_.metrics.count_cancelled();
}

std::shared_ptr<InFlight> submit_all(ServerState& state, std::vector<runtime::Request> requests, bool share_prompt,
                                     const std::string& client) {
    std::vector<uint64_t> ids;
    try {
        for (runtime::Request& r : requests) {
            if (share_prompt && !ids.empty()) r.after_prefill_of = ids.front();
            r.client = client;
            ids.push_back(state.scheduler.submit(std::move(r)));
        }
    } catch (const runtime::ClientQueueFull& e) {
        for (uint64_t id : ids) state.scheduler.cancel(id);
        state.metrics.count_rejected("client_queue");
        throw openai::ApiError(429, std::string("too many requests from this address: ") + e.what() + "; retry later",
                               "rate_limit_error", {}, "too_many_requests_from_client");
    } catch (const runtime::QueueFull& e) {
        for (uint64_t id : ids) state.scheduler.cancel(id);
        state.metrics.count_rejected("queue_full");
        throw openai::ApiError(503, std::string("the server is busy: ") + e.what() + "; retry later", "server_error", {}, "queue_full");
    } catch (const UsageError& e) {
        for (uint64_t id : ids) state.scheduler.cancel(id);
        throw openai::invalid_request(e.what(), {}, "context_length_exceeded");
    }
    return std::make_shared<InFlight>(state, std::move(ids), current_connection_socket());
}

}  // namespace strata::server
