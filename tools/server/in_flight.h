#pragma once
// Requests a connection submitted to the scheduler (one per choice, or per embedding input),
// tracked for shutdown and cancelled unless they finished when the connection is done with them
// (the client left, a write failed, the handler threw).
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/scheduler.h"
#include "tools/openai/api_error.h"
#include "tools/openai/reply_stream.h"
#include "tools/openai/request.h"
#include "tools/server/generation.h"
#include "tools/server/server_state.h"

namespace strata::server {

// How often a waiting connection looks for its client having gone.
inline constexpr std::chrono::milliseconds kPoll{100};

class InFlight {
public:
    InFlight(ServerState& state, std::shared_ptr<LoadedModel> model, std::vector<uint64_t> ids, int fd);
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
    // Waits for every choice of `gen`; false, with the requests cancelled, when the client goes away first.
    bool await_all(Generation& gen);
    const std::vector<uint64_t>& ids() const { return ids_; }

private:
    ServerState& state_;
    std::shared_ptr<LoadedModel> model_;  // held until the requests are answered: never unloaded under them
    std::vector<uint64_t> ids_;
    int fd_;
    bool finished_ = false;
};

// Submits `requests` to `model`'s scheduler in order as `client`'s (the peer's address: the scheduler shares the batch
// and the queue between clients); with share_prompt (choices of one prompt) each after the
// first is admitted once the first has the prompt in the KV cache. Throws ApiError 503 when
// the queue is full, 429 when the client has its share of it waiting while others have work,
// and 400 for a request that can never run; none stays submitted then.
std::shared_ptr<InFlight> submit_all(ServerState& state, const std::shared_ptr<LoadedModel>& model,
                                     std::vector<runtime::Request> requests, bool share_prompt, const std::string& client);

// A completion request's choices submitted (one scheduler request each, sharing the prompt's KV),
// with what hands their text over. Throws ApiError as submit_all.
struct Submitted {
    std::shared_ptr<Generation> gen;
    std::shared_ptr<InFlight> flight;
};
Submitted submit_completion(ServerState& state, const std::shared_ptr<LoadedModel>& model, const openai::CompletionRequest& creq,
                            const std::string& client);
// A one-choice reply streamed as it is written: `forward` is given each piece that holds anything
// (its reasoning, content and calls apart as `creq` sets them) and returns false when its write
// failed; the first token's time (from `arrived`) goes to the metrics. The results once the
// reply is over; nullopt when the client left or a write failed (the sequence cancelled).
std::optional<std::vector<runtime::GenerateResult>> stream_one_reply(ServerState& state, const Submitted& s,
                                                                     const openai::CompletionRequest& creq,
                                                                     std::chrono::steady_clock::time_point arrived,
                                                                     const std::function<bool(const openai::ReplyStream::Delta&)>& forward);
// The first result that ended badly (cancelled by shutdown, or failed), if any; and its error.
const runtime::GenerateResult* failed(const std::vector<runtime::GenerateResult>& results);
openai::ApiError result_error(const runtime::GenerateResult& r);

}  // namespace strata::server
