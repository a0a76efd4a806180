#pragma once
// One request's hand-over between the scheduler's thread (text pieces, the result) and the
// connection's thread (which writes them to the client). Shared by both through a
// shared_ptr, so either side may finish first.
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "runtime/scheduler.h"

namespace strata::server {

class Generation {
public:
    // A scheduler request whose callbacks feed this object.
    static runtime::Request request(const std::shared_ptr<Generation>& g, std::vector<int32_t> prompt, runtime::GenerateParams params);

    // What arrived since the last call: text not yet taken, and whether the result is in.
    struct Update {
        std::string text;
        bool done = false;
    };
    // Waits until there is text or the result, or `timeout` passes.
    Update wait(std::chrono::milliseconds timeout);
    // Valid once an Update said done.
    const runtime::GenerateResult& result() const { return result_; }

private:
    std::mutex mu_;
    std::condition_variable cv_;
    std::string pending_;
    bool done_ = false;
    runtime::GenerateResult result_;
};

}  // namespace strata::server
