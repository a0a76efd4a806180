// `strata perplexity`: llama.cpp's method. The text is split into chunks of --chunk tokens;
// each chunk is evaluated from an empty cache and only its second half is scored, so every
// scored token sees at least half a chunk of context. Each chunk is a scoring request of the
// scheduler, whose passes hand over every position's logits.
#include <cmath>
#include <cstdio>
#include <mutex>

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/sampler.h"
#include "runtime/scheduler.h"
#include "tools/cli_options.h"
#include "tools/progress.h"

namespace strata::cli {

namespace {
// -log p(target) under a row of logits.
double nll_of(std::span<const float> row, int32_t target) {
    double max_l = row[0];
    for (float l : row) max_l = std::max<double>(max_l, l);
    double sum = 0;
    for (float l : row) sum += std::exp(l - max_l);
    return std::log(sum) + max_l - row[target];
}
}  // namespace

int run_perplexity(const PerplexityOptions& o) {
    const std::string text = read_file(o.file, "the text", "give a text file with -f");

    ModelOptions mo = o.m;
    if (mo.ctx > 0 && mo.ctx < o.ctx)
        throw UsageError(fmt::format("--ctx {} cannot hold a chunk of {} tokens", mo.ctx, o.ctx),
                         fmt::format("give --chunk {} or less, or leave --ctx out (the chunk sizes it)", mo.ctx));
    if (o.ctx < 4) throw UsageError(fmt::format("--chunk {} is too small", o.ctx), "give --chunk 4 or more (512 is llama.cpp's)");
    // A chunk fills the context, as llama-perplexity's -c does: a long-context model's rope
    // (Phi-3's short or long factors) is the one it chooses for that context.
    mo.ctx = std::max(mo.ctx, o.ctx);
    runtime::EngineOptions eo = mo.engine();
    eo.decode_rows = 1;  // nothing is decoded
    eo.sized_by = "a smaller --chunk";
    runtime::Engine engine(eo);
    const models::Tokenizer& tok = engine.tokenizer();
    auto ids = tok.encode(text, tok.add_bos_default(), false);
    const size_t n_text = ids.size();
    if (o.max_tokens > 0 && ids.size() > static_cast<size_t>(o.max_tokens)) ids.resize(o.max_tokens);
    const size_t n_chunks = ids.size() / o.ctx;
    if (n_chunks == 0)
        throw UsageError(ids.size() < n_text ? fmt::format("--max-tokens {} of '{}' ({} tokens) are fewer than one chunk of {}",
                                                           o.max_tokens, o.file, n_text, o.ctx)
                                             : fmt::format("'{}' has {} tokens, fewer than one chunk of {}", o.file, ids.size(), o.ctx),
                         ids.size() < n_text ? "give a larger --max-tokens or a smaller --chunk" : "use a longer text or a smaller --chunk");

    const int n_vocab = engine.hparams().n_vocab;
    const int first = o.ctx / 2;
    // Each scored position's -log p of the next token, kept by position: a chunk preempted and
    // computed again hands the same positions over again.
    std::vector<double> nll(n_chunks * size_t(o.ctx), 0.0);
    runtime::Scheduler scheduler(engine, runtime::SchedulerOptions{1, static_cast<int>(n_chunks)});
    Progress progress("perplexity", n_chunks);
    std::mutex mu;
    std::string failed;
    size_t n_done = 0;
    double sum = 0;
    for (size_t c = 0; c < n_chunks; ++c) {
        runtime::Request r;
        r.prompt.assign(ids.begin() + c * o.ctx, ids.begin() + (c + 1) * o.ctx);
        if (tok.add_bos_default()) r.prompt[0] = tok.bos();
        r.params.n_predict = 0;
        r.on_prompt_logits = [&, c](size_t pos0, std::span<const float> rows) {
            for (size_t k = 0; k < rows.size() / size_t(n_vocab); ++k)
                if (const size_t i = pos0 + k; i >= size_t(first) && i + 1 < size_t(o.ctx))
                    nll[c * o.ctx + i] = nll_of(rows.subspan(k * n_vocab, n_vocab), ids[c * o.ctx + i + 1]);
        };
        r.on_done = [&, c](const runtime::GenerateResult& result) {
            std::lock_guard lock(mu);
            if (result.stop_reason == "error" && failed.empty()) failed = result.error;
            for (int i = first; i < o.ctx - 1; ++i) sum += nll[c * o.ctx + i];
            ++n_done;
            progress.update(n_done, fmt::format("PPL so far {:.4f}", std::exp(sum / double(n_done * (o.ctx - 1 - first)))));
        };
        scheduler.submit(std::move(r));
    }
    scheduler.wait_idle();
    progress.finish();
    if (!failed.empty()) throw Error(fmt::format("perplexity: a chunk failed: {}", failed));
    if (!std::isfinite(sum)) throw Error(fmt::format("perplexity: {}", runtime::kNanOutput));
    const size_t count = n_chunks * size_t(o.ctx - 1 - first);
    std::printf("chunks: %zu x %d tokens, scored: %zu tokens\n", n_chunks, o.ctx, count);
    std::printf("PPL = %.4f\n", std::exp(sum / double(count)));
    return 0;
}

}  // namespace strata::cli
