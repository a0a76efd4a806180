// `strata batch -i in.jsonl -o out.jsonl`: OpenAI batch requests run through the Scheduler,
// up to --max-batch at a time. Bad lines become error records and the rest still runs.
// Resumable: a rerun with the same output skips what it holds, so a kill or Ctrl-C costs at
// most the requests in flight.
#include <algorithm>
#include <csignal>
#include <condition_variable>
#include <mutex>
#include <set>
#include <sstream>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model_paths.h"
#include "models/chat_template.h"
#include "runtime/place/placement.h"
#include "runtime/scheduler.h"
#include "tools/cli_options.h"
#include "tools/openai/batch.h"
#include "tools/openai/batch_output.h"
#include "tools/progress.h"

namespace strata::cli {

namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_stop_signal(int) { g_interrupted = true; }

std::vector<std::string> read_lines(const std::string& path) {
    std::istringstream in(read_file(path, "the input file", "give the requests' JSONL file with -i"));
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        lines.push_back(std::move(line));
    }
    return lines;
}

bool is_blank(const std::string& line) { return line.find_first_not_of(" \t") == std::string::npos; }

// Finished requests, handed from the scheduler's thread to the writer (this thread).
struct Completions {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::pair<size_t, runtime::GenerateResult>> ready;  // index into the work list, result
};

}  // namespace

int run_batch(const BatchOptions& o) {
    if (o.max_batch < 1) throw UsageError(fmt::format("--max-batch {} must be at least 1", o.max_batch));
    if (std::filesystem::exists(o.output) && std::filesystem::equivalent(o.input, o.output))
        throw UsageError("the output file is the input file", "give -o another path");
    const std::vector<std::string> lines = read_lines(o.input);
    if (std::all_of(lines.begin(), lines.end(), is_blank))
        throw UsageError(fmt::format("'{}' holds no request", o.input), "give a JSONL file of requests, one a line");
    openai::BatchOutput out(o.output);
    if (out.truncated_bytes() > 0)
        fmt::print(stderr, "batch: removed a partial last line ({} bytes) left in {} by an interrupted run\n",
                   out.truncated_bytes(), o.output);

    runtime::EngineOptions eo = o.m.engine();
    // Planned for the sequences that run at once: --max-batch, or every request when there are fewer.
    const auto n_requests = std::count_if(lines.begin(), lines.end(), [](const std::string& l) { return !is_blank(l); });
    eo.n_batch = static_cast<int>(std::clamp<std::ptrdiff_t>(n_requests, 1, o.max_batch));
    const std::string model_id = resolve_model_path(eo.model).stem().string();
    runtime::Engine engine(eo);
    const models::ChatTemplate tmpl = models::ChatTemplate::from_gguf(engine.file(), o.chat_template);
    openai::ModelContext model{engine.tokenizer(), tmpl, engine.n_ctx(), model_id, engine.pooling(), engine.hparams().n_embd};
    model.reasoning_budget = o.reasoning_budget;

    // Read every line first: bad ones are reported and recorded before the model runs.
    std::vector<openai::BatchLine> work;
    std::unordered_set<std::string> seen;
    size_t n_skipped = 0, n_bad = 0, n_failed = 0;
    for (size_t i = 0; i < lines.size(); ++i) {
        if (is_blank(lines[i])) continue;
        openai::BatchLine item = openai::parse_batch_line(lines[i], i + 1, model);
        if (item.custom_id && !seen.insert(*item.custom_id).second) {
            fmt::print(stderr, "batch: line {}: custom_id '{}' appeared before; this line is skipped\n", i + 1, *item.custom_id);
            continue;
        }
        if (out.answered(item.custom_id, item.line_no)) {
            ++n_skipped;
            continue;
        }
        if (item.error) {
            fmt::print(stderr, "batch: line {}: {}\n", item.line_no, item.error->what());
            out.append(openai::batch_error_record(item.custom_id, item.line_no, *item.error));
            ++n_bad;
            continue;
        }
        work.push_back(std::move(item));
    }
    out.sync();
    if (n_skipped > 0)
        fmt::print(stderr, "batch: {} requests already answered in {} (failed ones too: remove their lines there to run them again)\n",
                   n_skipped, o.output);

    std::signal(SIGINT, on_stop_signal);
    std::signal(SIGTERM, on_stop_signal);
    // A small queue beyond the running batch keeps the next sequences ready without holding
    // many requests that an interruption would lose.
    runtime::SchedulerOptions so{o.max_batch, o.max_batch};
    const auto draft = o.m.load_draft_model(engine);
    so.spec = o.m.spec_options(draft.get());
    runtime::Scheduler scheduler(engine, so);
    Completions done;
    Progress progress("batch", work.size());
    const auto start = std::chrono::steady_clock::now();
    std::set<uint64_t> in_flight_ids;
    std::vector<uint64_t> id_of(work.size(), 0);
    size_t next = 0, n_done = 0, n_ok = 0, in_flight = 0;
    uint64_t tokens = 0, prompt_tokens = 0;
    bool cancelled = false;
    // Once interrupted, only the cancelled requests in flight are waited for.
    while ((!g_interrupted && next < work.size()) || in_flight > 0) {
        while (!g_interrupted && next < work.size() && in_flight < static_cast<size_t>(2 * o.max_batch)) {
            openai::BatchLine& item = work[next];
            runtime::Request r;
            r.prompt = item.request->prompt;
            r.params = item.request->params;
            r.on_text = [](std::string_view) { return true; };
            r.on_done = [&done, index = next](const runtime::GenerateResult& result) {
                std::lock_guard lock(done.mu);
                done.ready.emplace_back(index, result);
                done.cv.notify_one();
            };
            try {
                id_of[next] = scheduler.submit(std::move(r));
                in_flight_ids.insert(id_of[next]);
                ++in_flight;
            } catch (const runtime::QueueFull&) {
                break;  // full for now: retry once something finishes
            } catch (const UsageError& e) {
                fmt::print(stderr, "batch: line {}: {}\n", item.line_no, e.what());
                out.append(openai::batch_error_record(item.custom_id, item.line_no,
                                                      openai::invalid_request(e.what(), {}, "context_length_exceeded")));
                ++n_bad;
                ++n_done;
            }
            ++next;
        }
        if (g_interrupted && !cancelled) {
            fmt::print(stderr, "\nbatch: interrupted; cancelling {} requests in flight (a rerun does them)\n", in_flight);
            for (uint64_t id : in_flight_ids) scheduler.cancel(id);
            cancelled = true;
        }
        std::vector<std::pair<size_t, runtime::GenerateResult>> ready;
        {
            std::unique_lock lock(done.mu);
            done.cv.wait_for(lock, std::chrono::milliseconds(200), [&] { return !done.ready.empty(); });
            ready.swap(done.ready);
        }
        for (auto& [index, result] : ready) {
            --in_flight;
            in_flight_ids.erase(id_of[index]);
            const openai::BatchLine& item = work[index];
            if (result.stop_reason == "cancelled") continue;  // not written: a rerun does it
            ++n_done;
            tokens += result.tokens.size();
            prompt_tokens += result.prompt_tokens.size();
            if (result.stop_reason == "error") {
                fmt::print(stderr, "batch: line {}: generation failed: {}\n", item.line_no, result.error);
                out.append(openai::batch_error_record(
                    item.custom_id, item.line_no, openai::ApiError(500, result.error, "server_error", {}, "generation_failed")));
                ++n_failed;
            } else {
                out.append(openai::batch_success_record(*item.custom_id, *item.request, result, engine.tokenizer()));
                ++n_ok;
            }
        }
        if (!ready.empty()) {
            out.sync();
            const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            progress.update(n_done, fmt::format("{:.1f} tokens/s", secs > 0 ? tokens / secs : 0.0));
        }
    }
    if (g_interrupted && !cancelled)  // interrupted as the last requests in flight finished
        fmt::print(stderr, "\nbatch: interrupted; nothing was in flight (a rerun does the rest)\n");
    progress.finish();
    engine.save_routing_stats();  // for the next plan of a mixture of experts
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fmt::print(stderr, "batch: {} answered, {} bad lines, {} failed, {} skipped; {} tokens generated, {:.1f} tokens/s\n",
               n_ok, n_bad, n_failed, n_skipped, tokens, secs > 0 ? tokens / secs : 0.0);
    if (n_ok + n_failed > 0) {
        // What the plan expects for requests of these average lengths run max-batch at a time.
        const int n = static_cast<int>(n_ok + n_failed);
        const int batch = std::min(o.max_batch, n);
        const planner::Prediction p = engine.predict(static_cast<int>(prompt_tokens / n),
                                                                 static_cast<int>(std::max<uint64_t>(1, tokens / n)), batch);
        fmt::print(stderr, "batch: the plan predicts {:.1f} tokens/s for {} sequences of {} prompt and {} generated tokens at once\n",
                   p.throughput_tps, batch, prompt_tokens / n, tokens / n);
    }
    if (g_interrupted) return 130;
    // Every request of the file refused or failed (none answered, now or before): not a success.
    if (n_ok == 0 && n_skipped == 0 && n_bad + n_failed > 0) {
        fmt::print(stderr, "strata: error: no request of {} was answered; the error records in {} say why\n", o.input, o.output);
        return 1;
    }
    return 0;
}

}  // namespace strata::cli
