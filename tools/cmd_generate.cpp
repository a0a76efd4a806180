// `strata generate`: complete a prompt, streaming text to stdout, or print one JSON object; the
// request runs through the scheduler like every other command's.
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "planner/plan_report.h"
#include "runtime/exec/routing_stats.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/place/placement.h"
#include "runtime/scheduler.h"
#include "runtime/weights/weight_store.h"
#include "tools/cli_options.h"
#include "tools/progress.h"

namespace strata::cli {

namespace {
uint64_t peak_rss_bytes() {
    struct rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return static_cast<uint64_t>(ru.ru_maxrss) * 1024;  // Linux reports KiB
}

// The placement and what the plan predicts for this very run as it ran (layers a loss of device
// memory moved priced on the CPU), beside the measured timings.
nlohmann::json plan_json(const runtime::Engine& engine, const runtime::GenerateResult& r) {
    const std::shared_ptr<const runtime::Placement> running = engine.running_placement();
    const runtime::Placement& p = *running;
    const int n_streamed = p.residency.n_streamed();
    const planner::Prediction pred = p.predict(static_cast<int>(r.prompt_tokens.size()), static_cast<int>(r.tokens.size()));
    planner::Plan priced = p.plan;  // its summary priced for this run too, not for the planning workload
    priced.prediction = pred;
    return {{"summary", planner::plan_summary(priced)},
            {"given", p.search.n_policies == 0},
            {"hardware", p.hw_source},
            {"layers_resident", static_cast<int>(p.residency.resident.size()) - n_streamed},
            {"layers_streamed", n_streamed},
            {"predicted",
             {{"prefill_tokens_per_s", pred.ttft_s > 0 ? static_cast<double>(r.prompt_tokens.size()) / pred.ttft_s : 0.0},
              {"decode_tokens_per_s", pred.decode_tps_per_seq},
              {"decode_bottleneck", planner::stream_name(pred.decode.bottleneck)}}}};
}

// The expert cache of offloaded experts and the experts held on a device (null when neither),
// as the run ended (a loss of device memory gives held experts back to the host).
nlohmann::json experts_json(const runtime::Engine& engine) {
    const runtime::ExpertCache* c = engine.weights().expert_cache();
    const std::shared_ptr<const runtime::Placement> running = engine.running_placement();
    const planner::ExpertPlan& plan = running->plan.experts;
    // Choices the device computed: none held now when a loss of device memory gave them all back.
    const uint64_t device_choices = engine.gauges().gpu_expert_choices;
    if (!c && !plan.has_device() && device_choices == 0) return nullptr;
    nlohmann::json j = {{"routing", plan.routing}};
    if (c) {
        const runtime::ExpertCacheStats s = c->stats();
        j.update({{"cache_slots", c->n_slots()},     {"hits", s.hits},
                  {"misses", s.misses},              {"hit_rate", s.hit_rate()},
                  {"bytes_read", s.bytes_read},      {"predicted_hit_rate", plan.hit_rate},
                  {"policy", runtime::expert_policy_name(running->residency.experts.policy)}});
    }
    if (plan.has_device() || device_choices > 0) {
        // What share of this run's choices the device computed (its held experts, while it held them).
        const runtime::RoutingStats* stats = engine.routing_stats();
        j.update({{"on_device", plan.n_device()},
                  {"device_share", stats ? runtime::RoutingStats::share(device_choices, stats->snapshot()) : 0.0},
                  {"predicted_device_share", plan.device_share_mean()}});
    }
    return j;
}

// A run whose pass failed ends the command with its error; a grammar's dead end is an outcome.
runtime::GenerateResult finished(runtime::GenerateResult r) {
    if (r.stop_reason == "error" && r.error != runtime::kGrammarDeadEnd) throw Error(r.error);
    return r;
}

std::string read_prompt(const GenerateOptions& o) {
    if (!o.prompt.empty()) return o.prompt;
    if (!o.prompt_file.empty()) return read_file(o.prompt_file, "the prompt file", "give a readable file with -f");
    if (isatty(STDIN_FILENO)) throw UsageError("no prompt given", "pass -p TEXT, -f FILE, or pipe text on stdin");
    return read_stdin();
}
}  // namespace

int run_generate(const GenerateOptions& o) {
    const std::string prompt = read_prompt(o);
    if (prompt.empty()) throw UsageError("the prompt is empty", "give some text with -p, -f or on standard input");
    const auto grammar = load_grammar(o.grammar_file, o.schema_file);
    runtime::EngineOptions eo = o.m.engine();
    const int n_predict = tokens_to_generate(o.n_predict);
    eo.n_predict = n_predict;  // the plan's workload: this request
    eo.prompt = prompt;
    announce_loading(eo.model);
    runtime::Engine engine(eo);
    const models::Tokenizer& tok = engine.tokenizer();
    auto ids = tok.encode(prompt, tok.add_bos_default() && !o.no_bos, true);

    runtime::SchedulerOptions so{1, 1};
    const auto draft = o.m.load_draft_model(engine);
    so.spec = o.m.spec_options(draft.get());
    runtime::Scheduler scheduler(engine, so);
    runtime::Request request;
    request.prompt = std::move(ids);
    request.params.n_predict = n_predict;
    request.params.sampler = o.sampler;
    request.params.stop = o.stop;
    request.params.ignore_eos = o.ignore_eos;
    request.params.grammar = grammar;

    if (o.json) {
        auto r = finished(scheduler.run(std::move(request)));
        nlohmann::json j = {
            {"prompt_tokens", r.prompt_tokens},
            {"tokens", r.tokens},
            {"text", r.text},
            {"stop_reason", r.stop_reason},
            {"timings",
             {{"prefill_tokens_per_s", r.prefill_tokens_per_s()},
              {"decode_tokens_per_s", r.decode_tokens_per_s()},
              {"tokens_per_pass", r.tokens_per_pass()},
              {"drafted", r.n_drafted},
              {"accepted", r.n_accepted}}},
            {"memory", {{"peak_rss_bytes", peak_rss_bytes()}, {"layers_streamed", engine.weights().residency().n_streamed()},
                        {"kv_layers_spilled", engine.kv_cache().n_spilled()},
                        {"bytes_streamed", engine.weights().stats().bytes_read},
                        {"experts", experts_json(engine)}}},
            {"plan", plan_json(engine, r)},
        };
        std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
        return 0;
    }
    scheduler.check(request);  // before the prompt is echoed: a refused request prints nothing
    std::fwrite(prompt.data(), 1, prompt.size(), stdout);
    std::fflush(stdout);
    request.on_text = [](std::string_view s) {
        std::fwrite(s.data(), 1, s.size(), stdout);
        std::fflush(stdout);
        return true;
    };
    auto r = finished(scheduler.run(std::move(request)));
    std::fputc('\n', stdout);
    std::fprintf(stderr, "\nprompt: %zu tokens, %.1f tokens/s | generated: %zu tokens, %.1f tokens/s, %.2f a pass (%s)\n",
                 r.prompt_tokens.size(), r.prefill_tokens_per_s(), r.tokens.size(), r.decode_tokens_per_s(),
                 r.tokens_per_pass(), r.stop_reason.c_str());
    return 0;
}

}  // namespace strata::cli
