// `strata embed`: texts in, embedding vectors out, through the same scheduler and pooling as
// `strata serve`'s /v1/embeddings, printed as its answer ({"data": [{"index", "embedding"}]}).
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model_paths.h"
#include "runtime/scheduler.h"
#include "tools/cli_options.h"
#include "tools/openai/embeddings.h"

namespace strata::cli {

namespace {
std::vector<std::string> input_texts(const EmbedOptions& o) {
    for (size_t i = 0; i < o.texts.size(); ++i)
        if (o.texts[i].empty())  // as generate refuses an empty prompt: an empty text has nothing to mean
            throw UsageError(fmt::format("-p number {} is empty: there is nothing to embed", i + 1), "give each -p some text");
    if (!o.texts.empty()) return o.texts;
    if (o.file.empty() && isatty(STDIN_FILENO)) throw UsageError("no text given", "pass -p TEXT, -f FILE, or pipe lines on stdin");
    std::istringstream in(o.file.empty() ? read_stdin() : read_file(o.file, "the input file", "give a readable file with -f"));
    std::vector<std::string> texts;
    std::vector<size_t> blank;  // line numbers
    for (std::string line; std::getline(in, line);) {
        if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF: the text is the line without it
        if (line.find_first_not_of(" \t\r") != std::string::npos)
            texts.push_back(line);
        else
            blank.push_back(texts.size() + blank.size() + 1);
    }
    if (texts.empty()) throw UsageError("there is no text to embed", "give one text a line");
    if (!blank.empty())
        fmt::print(stderr, "embed: skipped {} blank line{} ({}{}); the indexes count the texts embedded\n", blank.size(),
                   blank.size() == 1 ? "" : "s", fmt::join(blank.begin(), blank.begin() + std::min<size_t>(blank.size(), 8), ", "),
                   blank.size() > 8 ? ", ..." : "");
    return texts;
}
}  // namespace

int run_embed(const EmbedOptions& o) {
    const std::vector<std::string> texts = input_texts(o);
    runtime::EngineOptions eo = o.m.engine();
    eo.decode_rows = 1;  // nothing is decoded
    openai::EmbeddingRequest req;
    req.model = resolve_model_path(eo.model).stem().string();
    req.base64 = o.base64;
    runtime::Engine engine(eo);
    const runtime::Pooling pooling = pooling_or(o.pooling, engine.pooling());
    for (const std::string& t : texts) {
        req.inputs.push_back(openai::embedding_tokens(t, engine.tokenizer()));
        if (static_cast<int64_t>(req.inputs.back().size()) > engine.n_ctx())
            throw UsageError(fmt::format("text {} (its index in the answer) has {} tokens, more than the context of {}",
                                         req.inputs.size() - 1, req.inputs.back().size(), engine.n_ctx()),
                             "split the text, or raise --ctx");
    }
    runtime::Scheduler scheduler(engine, runtime::SchedulerOptions{8, static_cast<int>(req.inputs.size())});
    std::vector<runtime::GenerateResult> results(req.inputs.size());
    std::mutex mu;
    std::condition_variable cv;
    size_t n_done = 0;
    for (size_t i = 0; i < req.inputs.size(); ++i) {
        runtime::Request r;
        r.prompt = req.inputs[i];
        r.params.n_predict = 0;
        r.embed = pooling;
        r.on_done = [&, i](const runtime::GenerateResult& result) {
            std::lock_guard lock(mu);
            results[i] = result;
            ++n_done;
            cv.notify_one();
        };
        scheduler.submit(std::move(r));
    }
    {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return n_done == results.size(); });
    }
    for (const auto& r : results)
        if (r.stop_reason != "stop") throw Error(fmt::format("an embedding failed: {}", r.error.empty() ? r.stop_reason : r.error));
    std::puts(openai::dump(openai::embedding_json(req, results)).c_str());
    return 0;
}

}  // namespace strata::cli
