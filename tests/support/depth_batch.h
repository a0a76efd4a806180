#pragma once
// A batch at one depth as `strata bench -d` fills it: one request's prefill of the depth, then
// the batch's requests (the depth and a tail each), run together through the scheduler.
#include <algorithm>
#include <mutex>
#include <vector>

#include "runtime/scheduler.h"
#include "tests/support/greedy.h"

namespace strata::test {

struct DepthBatch {
    std::vector<runtime::GenerateResult> results;  // in the tails' order
    // The most sequences that held one KV block at once while tokens were being generated.
    int max_holders = 0;
};

// With `own_prefix`, each request copies the cached depth blocks another sequence holds
// (runtime::Request::own_prefix); without, the batch attaches them by reference.
inline DepthBatch after_one_fill(runtime::Engine& engine, const std::vector<int32_t>& depth,
                                 const std::vector<std::vector<int32_t>>& tails, int n_gen, bool own_prefix) {
    const int n = static_cast<int>(tails.size());
    runtime::Scheduler sched(engine, {n, n});
    runtime::Request fill;
    fill.prompt = depth;
    fill.params = greedy(0, true);
    sched.run(std::move(fill));
    DepthBatch out;
    out.results.resize(size_t(n));
    std::mutex mu;
    // Called on the scheduler's thread, between passes: the pool is still.
    auto count_holders = [&] {
        const runtime::KvBlockPool& pool = engine.kv().pool();
        std::lock_guard lock(mu);
        for (int32_t b = 0; b < pool.n_blocks(); ++b) out.max_holders = std::max(out.max_holders, pool.ref_count(b));
    };
    for (int i = 0; i < n; ++i) {
        runtime::Request r;
        r.prompt = depth;
        r.prompt.insert(r.prompt.end(), tails[size_t(i)].begin(), tails[size_t(i)].end());
        r.params = greedy(n_gen, true);
        r.own_prefix = own_prefix;
        r.on_text = [&](std::string_view) {
            count_holders();
            return true;
        };
        r.on_done = [&out, &mu, i](const runtime::GenerateResult& g) {
            std::lock_guard lock(mu);
            out.results[size_t(i)] = g;
        };
        sched.submit(std::move(r));
    }
    sched.wait_idle();
    return out;
}

}  // namespace strata::test
