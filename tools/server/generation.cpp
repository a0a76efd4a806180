#include "tools/server/generation.h"

#include <algorithm>

namespace strata::server {

runtime::Request Generation::request(const std::shared_ptr<Generation>& g, int index, std::vector<int32_t> prompt,
                                     runtime::GenerateParams params) {
    runtime::Request r;
    r.prompt = std::move(prompt);
    r.params = std::move(params);
    const auto at = static_cast<size_t>(index);
    r.on_text = [g, at](std::string_view text) {
        {
            std::lock_guard lock(g->mu_);
            g->slots_[at].pending.append(text);
        }
        g->cv_.notify_all();
        return true;  // the connection's thread cancels through the scheduler
    };
    r.on_logprobs = [g, at](const runtime::SampledLogprobs& lp) {
        std::lock_guard lock(g->mu_);
        g->slots_[at].logprobs.push_back(lp);
    };
    r.on_done = [g, at](const runtime::GenerateResult& result) {
        {
            std::lock_guard lock(g->mu_);
            g->slots_[at].result = result;
            g->slots_[at].done = true;
        }
        g->cv_.notify_all();
    };
    return r;
}

std::vector<Generation::Update> Generation::wait(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.has_news(); }); });
    std::vector<Update> out;
    for (size_t i = 0; i < slots_.size(); ++i) {
        Slot& s = slots_[i];
        if (!s.has_news()) continue;
        Update u;
        u.index = static_cast<int>(i);
        u.text.swap(s.pending);
        u.logprobs.swap(s.logprobs);
        u.done = s.done && !s.reported;
        u.cut = u.done && (s.result.stop_reason == "length" || s.result.stop_reason == "context");
        s.reported = s.reported || s.done;
        out.push_back(std::move(u));
    }
    return out;
}

bool Generation::all_done() const {
    std::lock_guard lock(mu_);
    return std::all_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.done; });
}

std::vector<runtime::GenerateResult> Generation::results() const {
    std::lock_guard lock(mu_);
    std::vector<runtime::GenerateResult> out;
    for (const Slot& s : slots_) out.push_back(s.result);
    return out;
}

}  // namespace strata::server
