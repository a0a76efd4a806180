#include "tools/server/generation.h"

namespace strata::server {

runtime::Request Generation::request(const std::shared_ptr<Generation>& g, std::vector<int32_t> prompt, runtime::GenerateParams params) {
    runtime::Request r;
    r.prompt = std::move(prompt);
    r.params = std::move(params);
    r.on_text = [g](std::string_view text) {
        {
            std::lock_guard lock(g->mu_);
            g->pending_.append(text);
        }
        g->cv_.notify_all();
        return true;  // the connection's thread cancels through the scheduler
    };
    r.on_done = [g](const runtime::GenerateResult& result) {
        {
            std::lock_guard lock(g->mu_);
            g->result_ = result;
            g->done_ = true;
        }
        g->cv_.notify_all();
    };
    return r;
}

Generation::Update Generation::wait(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return done_ || !pending_.empty(); });
    Update u;
    u.text.swap(pending_);
    u.done = done_;
    return u;
}

}  // namespace strata::server
