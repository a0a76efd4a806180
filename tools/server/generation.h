#pragma once
// One request's hand-over between the scheduler's thread (text pieces, log-probabilities, the
// results) and the connection's thread (which writes them to the client), for each of its
// choices (one scheduler request each). Shared by both through a shared_ptr, so either side
// may finish first.
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/scheduler.h"

namespace strata::server {

class Generation {
public:
    explicit Generation(int n_choices) : slots_(static_cast<size_t>(n_choices)) {}

    // A scheduler request whose callbacks feed choice `index`.
    static runtime::Request request(const std::shared_ptr<Generation>& g, int index, std::vector<int32_t> prompt,
                                    runtime::GenerateParams params);

    // What a choice sent since the last call: text, its tokens' log-probabilities, and whether
    // its result is in (said once).
    struct Update {
        int index = 0;
        std::string text;
        std::vector<runtime::SampledLogprobs> logprobs;
        bool done = false;
        bool cut = false;  // done at its length or the context's end (a tool call may be unfinished)
    };
    // Waits until some choice has news or `timeout` passes; the news of every choice that has some.
    std::vector<Update> wait(std::chrono::milliseconds timeout);
    bool all_done() const;
    // Every choice's result, once all are done.
    std::vector<runtime::GenerateResult> results() const;

private:
    struct Slot {
        std::string pending;
        std::vector<runtime::SampledLogprobs> logprobs;
        bool done = false, reported = false;
        runtime::GenerateResult result;
        bool has_news() const { return !pending.empty() || !logprobs.empty() || (done && !reported); }
    };
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::vector<Slot> slots_;
};

}  // namespace strata::server
