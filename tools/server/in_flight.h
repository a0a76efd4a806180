#pragma once
// Requests a connection submitted to the scheduler (one per choice, or per embedding input),
// tracked for shutdown and cancelled unless they finished when the connection is done with them
// (the client left, a write failed, the handler threw).
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/scheduler.h"
#include "tools/server/server_state.h"

namespace strata::server {

// How often a waiting connection looks for its client having gone.
inline constexpr std::chrono::milliseconds kPoll{100};

class InFlight {
public:
    InFlight(ServerState& state, std::vector<uint64_t> ids, int fd);
    ~InFlight();
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;

    // Calls `step` (which waits up to kPoll for news) until it returns true; false, with the
    // requests cancelled, when the client goes away first.
    bool await(const std::function<bool()>& step);
    // Cancels the requests (the client left or a write failed) and counts it.
    void cancel();
    // Every request has its result: nothing to cancel.
    void finished() { finished_ = true; }
    const std::vector<uint64_t>& ids() const { return ids_; }

private:
    ServerState& state_;
    std::vector<uint64_t> ids_;
    int fd_;
    bool finished_ = false;
};

// Submits `requests` in order as `client`'s (the peer's address: the scheduler shares the batch
// and the queue between clients); with share_prompt (choices of one prompt) each after the
// first is admitted once the first has the prompt in the KV cache. Throws ApiError 503 when
// the queue is full, 429 when the client has its share of it waiting while others have work,
// and 400 for a request that can never run; none stays submitted then.
std::shared_ptr<InFlight> submit_all(ServerState& state, std::vector<runtime::Request> requests, bool share_prompt,
                                     const std::string& client);

}  // namespace strata::server
