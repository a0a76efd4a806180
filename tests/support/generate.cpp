#include "tests/support/generate.h"

#include <algorithm>

#include "runtime/scheduler.h"

namespace strata::test {

runtime::GenerateResult generate(runtime::Engine& engine, std::span<const int32_t> prompt, const runtime::GenerateParams& params,
                                 const runtime::SpecOptions& spec) {
    runtime::SchedulerOptions so{1, 1};
    so.spec = spec;
    runtime::Scheduler scheduler(engine, so);
    runtime::Request r;
    r.prompt.assign(prompt.begin(), prompt.end());
    r.params = params;
    return scheduler.run(std::move(r));
}

std::vector<float> prompt_logits(runtime::Engine& engine, std::span<const int32_t> tokens) {
    const size_t V = static_cast<size_t>(engine.hparams().n_vocab);
    std::vector<float> all(tokens.size() * V);
    runtime::Scheduler scheduler(engine, runtime::SchedulerOptions{1, 1});
    runtime::Request r;
    r.prompt.assign(tokens.begin(), tokens.end());
    r.params.n_predict = 0;
    r.on_prompt_logits = [&](size_t first, std::span<const float> rows) { std::copy(rows.begin(), rows.end(), all.begin() + first * V); };
    scheduler.run(std::move(r));
    return all;
}

}  // namespace strata::test
