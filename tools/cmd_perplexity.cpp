// `strata perplexity`: llama.cpp's method. The text is split into chunks of --chunk tokens;
// each chunk is evaluated from an empty cache and only its second half is scored, so every
// scored token sees at least half a chunk of context.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "core/error.h"
#include "tools/cli_options.h"
#include "tools/progress.h"

namespace strata::cli {

int run_perplexity(const PerplexityOptions& o) {
    std::ifstream in(o.file, std::ios::binary);
    if (!in) throw UsageError(fmt::format("cannot read '{}'", o.file));
    const std::string text{std::istreambuf_iterator<char>(in), {}};

    ModelOptions mo = o.m;
    mo.ctx = std::max(mo.ctx, o.ctx);
    runtime::Engine engine(mo.engine());
    const models::Tokenizer& tok = engine.tokenizer();
    auto ids = tok.encode(text, tok.add_bos_default(), false);
    if (o.max_tokens > 0 && ids.size() > static_cast<size_t>(o.max_tokens)) ids.resize(o.max_tokens);
    if (o.ctx < 4) throw UsageError(fmt::format("--chunk {} is too small", o.ctx));
    const size_t n_chunks = ids.size() / o.ctx;
    if (n_chunks == 0)
        throw UsageError(fmt::format("'{}' has {} tokens, fewer than one chunk of {}", o.file, ids.size(), o.ctx),
                         "use a longer text or a smaller --chunk");

    const int n_vocab = engine.hparams().n_vocab;
    const int first = o.ctx / 2;
    double nll = 0;
    size_t count = 0;
    Progress progress("perplexity", n_chunks);
    for (size_t c = 0; c < n_chunks; ++c) {
        std::vector<int32_t> chunk(ids.begin() + c * o.ctx, ids.begin() + (c + 1) * o.ctx);
        if (tok.add_bos_default()) chunk[0] = tok.bos();
        engine.reset();
        auto logits = engine.eval(chunk, /*all_logits=*/true);
        for (int i = first; i < o.ctx - 1; ++i) {
            const float* row = &logits[static_cast<size_t>(i) * n_vocab];
            double max_l = row[0];
            for (int v = 1; v < n_vocab; ++v) max_l = std::max<double>(max_l, row[v]);
            double sum = 0;
            for (int v = 0; v < n_vocab; ++v) sum += std::exp(row[v] - max_l);
            nll += std::log(sum) + max_l - row[ids[c * o.ctx + i + 1]];
            ++count;
        }
        progress.update(c + 1, fmt::format("PPL so far {:.4f}", std::exp(nll / count)));
    }
    progress.finish();
    std::printf("chunks: %zu x %d tokens, scored: %zu tokens\n", n_chunks, o.ctx, count);
    std::printf("PPL = %.4f\n", std::exp(nll / count));
    return 0;
}

}  // namespace strata::cli
