// `strata bench`: prompt processing and generation speed in llama-bench's shape, so the numbers
// compare directly with llama.cpp's (bench/peer_llamacpp.py runs llama.cpp the same way). Every
// test's requests run through the scheduler, the generation loop of every command.
//   pp<P>  a request of P random tokens from an empty KV cache (passes of up to 256 tokens,
//          only the last token's logits computed); t/s = P / seconds.
//   tg<N>  a request of one random token generating N + 1 greedy tokens: N single-token
//          passes after the first; t/s = N / their seconds.
// With -b B, B requests run together (pp: their prompts in the same passes; tg: one token of
// each per step) and t/s is the aggregate, B x P (or N) / seconds; with -d D each sequence
// first holds D random positions (computed untimed, attached from the prefix cache), as
// llama-bench's -d (for tg with a batch, one prefill's, copied into each sequence's own
// blocks). The plan is made for this batch and its prompt of depth + P tokens; below
// the table: its prediction for the same runs (runtime/place/placement.h).
// For tg it also reports the memory speed decode reached: weight bytes per token x t/s against
// the profile's DRAM read rate, and, when layers stream from disk (--dram below the model),
// the bytes read per second against the profile's disk read rate (run `strata probe` first
// for this machine's figures).
// For a mixture-of-experts model it also says how the router spread each test's tokens over the
// experts (runtime/exec/routing_stats.h): the least and most chosen expert's share of its
// layer's choices against the even share; --json gives the counts per layer and expert.
// One untimed warm-up of each test runs first; the table shows mean ± sample stddev over -r reps.
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "cpu/cpu_features.h"
#include "core/model_paths.h"
#include "models/model_dir.h"
#include "runtime/exec/routing_stats.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/place/placement.h"
#include "runtime/scheduler.h"
#include "runtime/weights/expert_cache.h"
#include "runtime/weights/weight_store.h"
#include "tools/cli_options.h"

namespace strata::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct Row {
    std::string test;
    int n_tokens = 0;  // per sequence
    std::vector<double> ts;  // tokens/s of each rep
    std::vector<double> streamed_gbps;  // tg: bytes read from disk per second, each rep
    std::vector<std::vector<uint64_t>> expert_counts;  // tokens routed to each [layer][expert] in the reps
    uint64_t device_choices = 0;  // of those, the ones the device's held experts computed
    // A device held experts for some of the reps (or the plan says it holds them now).
    bool shows_device_share(const planner::ExpertPlan& plan) const {
        return (plan.has_device() || device_choices > 0) && !expert_counts.empty();
    }
    runtime::ExpertCacheStats experts;  // tg: the expert cache over the reps, when experts are offloaded
    int64_t decoded = 0, passes = 0;    // tg: tokens after the first and the passes that decoded them
    int64_t drafted = 0, accepted = 0;  // tg: draft tokens verified, and kept
    double tokens_per_pass() const { return passes > 0 ? double(decoded) / double(passes) : 0; }
};

using Counts = std::vector<std::vector<uint64_t>>;
Counts routing_counts(const runtime::Engine& e) {
    const runtime::RoutingStats* s = e.routing_stats();
    return s ? s->snapshot() : Counts{};
}
Counts minus(Counts a, const Counts& b) {
    for (size_t il = 0; il < a.size(); ++il)
        for (size_t x = 0; x < a[il].size(); ++x) a[il][x] -= b[il][x];
    return a;
}

// "8 of 128 experts per token; an expert's share of its layer's choices 0.10%..2.93% (even 0.78%)".
std::string routing_line(const Counts& c, int n_used) {
    double lo = 1, hi = 0;
    for (const auto& layer : c) {
        uint64_t total = 0;
        for (uint64_t n : layer) total += n;
        for (uint64_t n : layer) {
            const double share = total ? double(n) / total : 0;
            lo = std::min(lo, share), hi = std::max(hi, share);
        }
    }
    const size_t n_expert = c.empty() ? 0 : c[0].size();
    return fmt::format("{} of {} experts per token; an expert's share of its layer's choices {:.2f}%..{:.2f}% (even {:.2f}%)",
                       n_used, n_expert, 100 * lo, 100 * hi, n_expert ? 100.0 / n_expert : 0.0);
}

double mean(const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0 : s / v.size();
}
double stddev(const std::vector<double>& v) {
    if (v.size() < 2) return 0;
    const double m = mean(v);
    double s = 0;
    for (double x : v) s += (x - m) * (x - m);
    return std::sqrt(s / (v.size() - 1));
}

// "llama 135M Q4_1": architecture, parameter count, the type most weight bytes are in.
std::string model_label(const runtime::Engine& e, uint64_t& bytes, uint64_t& params) {
    std::map<DType, uint64_t> by_type;
    bytes = params = 0;
    for (const models::TensorInfo& t : e.file().tensors()) {
        bytes += t.nbytes;
        params += static_cast<uint64_t>(t.nelements());
        if (t.n_dims >= 2) by_type[t.type] += t.nbytes;
    }
    DType main = DType::F32;
    uint64_t best = 0;
    for (const auto& [type, n] : by_type)
        if (n > best) best = n, main = type;
    return fmt::format("{} {} {}", models::arch_name(e.hparams().arch), models::parameter_size(params), dtype_name(main));
}

}  // namespace

// The positions a context, and a batch's KV cache, may hold here (their counts are int32).
constexpr int64_t kMaxPositions = int64_t{1} << 30;

int run_bench(const BenchOptions& o) {
    if (o.n_prompt < 0 || o.n_gen < 0) throw UsageError("-p and -n must not be negative");
    if (o.reps < 1) throw UsageError(fmt::format("-r {} is not a positive number of repetitions", o.reps));
    if (o.n_prompt == 0 && o.n_gen == 0) throw UsageError("nothing to measure: -p and -n are both 0");
    // Every sequence's positions, and the batch's, counted where they cannot wrap.
    const int64_t per_sequence = int64_t(o.depth) + std::max(int64_t(o.n_prompt) + 1, int64_t(o.n_gen) + 2);
    if (per_sequence > kMaxPositions)
        throw UsageError(fmt::format("-d {} + -p {} / -n {} is more than the {} positions a context may hold", o.depth, o.n_prompt,
                                     o.n_gen, kMaxPositions),
                         "give smaller -d, -p or -n");
    if (int64_t(o.batch) * (per_sequence + runtime::KvCache::kBlockSize) > kMaxPositions)
        throw UsageError(fmt::format("-b {} sequences of {} positions are more than the {} positions a KV cache may hold",
                                     o.batch, per_sequence, kMaxPositions),
                         "give a smaller -b");
    runtime::EngineOptions eo = o.m.engine();
    eo.sized_by = "a smaller -b, -d, -p or -n";
    // A request holds its depth and its prompt (pp: n_prompt tokens; tg: one, and n_gen + 1
    // generated), and the scheduler keeps room for one more position.
    const int n_held = o.depth + std::max(o.n_prompt + 1, o.n_gen + 2);
    // The plan is made for the batch of these runs: a prompt of the depth and -p tokens (tg's
    // one when there is no pp), then -n generated (pp's first when there is no tg). The
    // context holds both, as llama-bench's does (depth + prompt + generation).
    eo.n_batch = o.batch;
    eo.n_prompt = o.depth + std::max(1, o.n_prompt);
    eo.n_predict = std::max(1, o.n_gen);
    if (eo.n_ctx == 0) eo.n_ctx = std::max(16, eo.n_prompt + eo.n_predict + 1);
    // Every sequence its whole context, in whole blocks (else the last one waits for room).
    const int64_t kv_positions = int64_t(o.batch) * runtime::KvCache::blocks_for(eo.n_ctx) * runtime::KvCache::kBlockSize;
    if (kv_positions > kMaxPositions)
        throw UsageError(fmt::format("-b {} contexts of {} positions are more than the {} positions a KV cache may hold", o.batch,
                                     eo.n_ctx, kMaxPositions),
                         "give a smaller -b or --ctx");
    eo.kv_positions = static_cast<int>(kv_positions);
    runtime::Engine engine(eo);
    if (n_held > engine.n_ctx())
        throw UsageError(fmt::format("-d {} + -p {} / -n {} do not fit the context of {}", o.depth, o.n_prompt, o.n_gen,
                                     engine.n_ctx()),
                         "raise --ctx");

    const int n_vocab = engine.hparams().n_vocab;
    std::mt19937 rng(1234);
    std::uniform_int_distribution<int32_t> token(0, n_vocab - 1);
    auto random_tokens = [&](int n) {
        std::vector<int32_t> toks(n);
        for (auto& t : toks) t = token(rng);
        return toks;
    };
    // Every test runs through the scheduler, `batch` requests at once. A sequence at depth D
    // starts with D random positions that an untimed request computed first, attached from the
    // prefix cache (whole blocks: a depth's last partial block is computed again in the test).
    // For tg with a batch, one prefill computes the depth (drawn once per run) for every
    // sequence, and each attaches a copy of those blocks of its own (Request::own_prefix): its
    // decode reads and moves its own KV as after a prefill of its own, at 1/B of the fill's cost
    // (a fill of 16 x 32k positions takes an hour on 2 cores). The copies are made as the
    // requests are admitted, which pp's time includes and tg's (each sequence's decode) does
    // not: pp, and an engine that cannot copy blocks (KV spilled to disk), fill each
    // sequence's depth with a prefill of its own, as with -b 1.
    const bool can_fill_once = o.batch > 1 && o.depth > 0 && engine.copies_blocks();
    bool one_fill = false;  // the test being run fills its depth once
    runtime::SchedulerOptions so{o.batch, o.batch};
    const auto draft = o.m.load_draft_model(engine);
    so.spec = o.m.spec_options(draft.get());
    runtime::Scheduler scheduler(engine, so);
    std::vector<std::vector<int32_t>> depth(o.batch);
    // Runs one request for each of the first n_seq sequences (its depth, then `fresh` new random
    // tokens, generating n_predict more) and returns each one's result.
    auto run_all = [&](int fresh, int n_predict, int n_seq) {
        std::vector<runtime::GenerateResult> results(n_seq);
        for (int i = 0; i < n_seq; ++i) {
            runtime::Request r;
            r.prompt = depth[i];
            const auto more = random_tokens(fresh);
            r.prompt.insert(r.prompt.end(), more.begin(), more.end());
            r.params.n_predict = n_predict;
            r.params.ignore_eos = true;
            r.params.sampler.temperature = 0;
            r.own_prefix = one_fill;
            r.on_done = [&results, i](const runtime::GenerateResult& res) { results[i] = res; };
            scheduler.submit(std::move(r));
        }
        scheduler.wait_idle();
        for (const auto& r : results)
            if (r.stop_reason == "error") throw Error(fmt::format("bench: a request failed: {}", r.error));
        return results;
    };
    auto start_test = [&](bool fill_once) {
        one_fill = fill_once && can_fill_once;
        if (one_fill) {
            if (depth[0].empty() || depth[0] != depth[1]) depth.assign(o.batch, random_tokens(o.depth));
            run_all(0, 0, 1);  // later tests find it cached but for its last block
            return;
        }
        for (auto& d : depth) d = random_tokens(o.depth);
        if (o.depth > 0) run_all(0, 0, o.batch);
    };
    // pp: each sequence's n prompt tokens, from submission to the last request's end.
    auto run_pp = [&](int n) {
        start_test(false);
        const auto t0 = Clock::now();
        run_all(n, 0, o.batch);
        return std::chrono::duration<double>(Clock::now() - t0).count();
    };
    uint64_t streamed = 0;  // bytes the last tg run read from disk
    int64_t decoded = 0, passes = 0, drafted = 0, accepted = 0;  // by the tg runs: tokens after the first, their passes, drafts
    // tg: n tokens after the first (which one prompt token's pass gives), one a pass or more
    // where drafts are kept (--spec): the decode of the slowest sequence.
    auto run_tg = [&](int n) {
        start_test(true);
        const uint64_t read0 = engine.weights().stats().bytes_read;
        double seconds = 0;
        for (const auto& r : run_all(1, n + 1, o.batch)) {
            seconds = std::max(seconds, r.decode_seconds * n / std::max(1, r.decode_tokens()));
            decoded += r.decode_tokens(), passes += r.n_decode_evals, drafted += r.n_drafted, accepted += r.n_accepted;
        }
        streamed = engine.weights().stats().bytes_read - read0;
        return seconds;
    };

    // llama-bench's test names, with the batch and depth when given.
    auto test_name = [&](const char* kind, int n) {
        std::string name = fmt::format("{}{}", kind, n);
        if (o.batch > 1) name += fmt::format(" x{}", o.batch);
        if (o.depth > 0) name += fmt::format(" @ d{}", o.depth);
        return name;
    };
    std::vector<Row> rows;
    if (o.n_prompt > 0) rows.push_back({test_name("pp", o.n_prompt), o.n_prompt, {}, {}});
    if (o.n_gen > 0) rows.push_back({test_name("tg", o.n_gen), o.n_gen, {}, {}});
    for (Row& r : rows) {
        const bool pp = r.test[0] == 'p';
        pp ? run_pp(r.n_tokens) : run_tg(std::min(r.n_tokens, 32));  // warm-up
        const Counts before = routing_counts(engine);
        const uint64_t device_before = engine.gauges().gpu_expert_choices;
        const runtime::ExpertCache* cache = engine.weights().expert_cache();
        const runtime::ExpertCacheStats cache0 = cache ? cache->stats() : runtime::ExpertCacheStats{};
        decoded = passes = drafted = accepted = 0;
        for (int i = 0; i < o.reps; ++i) {
            const double seconds = pp ? run_pp(r.n_tokens) : run_tg(r.n_tokens);
            r.ts.push_back(double(r.n_tokens) * o.batch / seconds);
            if (!pp) r.streamed_gbps.push_back(streamed / seconds / 1e9);
        }
        r.decoded = decoded, r.passes = passes, r.drafted = drafted, r.accepted = accepted;
        r.expert_counts = minus(routing_counts(engine), before);
        r.device_choices = engine.gauges().gpu_expert_choices - device_before;
        if (cache && !pp) {
            const runtime::ExpertCacheStats now = cache->stats();
            r.experts = {now.hits - cache0.hits, now.misses - cache0.misses, now.bytes_read - cache0.bytes_read,
                         now.wait_seconds - cache0.wait_seconds};
        }
    }
    engine.save_routing_stats();  // for the next plan of a mixture of experts
    const std::shared_ptr<const runtime::Placement> running = engine.running_placement();  // experts given back priced out
    const planner::ExpertPlan& expert_plan = running->plan.experts;
    // Bytes the expert cache read from disk per generated token.
    auto expert_disk_per_token = [&](const Row& r) {
        return double(r.experts.bytes_read) / (double(r.n_tokens) * o.batch * o.reps);
    };
    // What compute spent blocked on those reads, per generated token.
    auto expert_wait_ms_per_token = [&](const Row& r) {
        return 1e3 * r.experts.wait_seconds / (double(r.n_tokens) * o.batch * o.reps);
    };
    // Decode's memory speed against the profile the engine planned with.
    const planner::HardwareProfile& hw = engine.placement().hw;
    // Of a mixture of experts, the share one token uses.
    const uint64_t token_bytes = engine.weights().weights().decode_bytes();
    // One step reads the weights once for the whole batch.
    // The weights are read once a pass, and a pass decodes tokens_per_pass tokens of each sequence.
    auto weights_gbps = [&](const Row& r) { return token_bytes * mean(r.ts) / o.batch / std::max(1.0, r.tokens_per_pass()) / 1e9; };
    // The plan's prediction for the same run: a pass of batch prompts, or decode steps at the
    // depth (the planner prices a step at the average context of the generation).
    auto predicted_ts = [&](const Row& r) {
        if (r.test[0] == 'p') {
            const planner::Prediction p = engine.predict(r.n_tokens, 1, o.batch);
            return p.ttft_s > 0 ? double(r.n_tokens) * o.batch / p.ttft_s : 0.0;
        }
        return engine.predict(std::max(1, o.depth), r.n_tokens, o.batch).decode_tps_aggregate;
    };

    uint64_t bytes = 0, params = 0;
    const std::string label = model_label(engine, bytes, params);
    // The device's name is "cuda:0" or "sim"; the CPU's "cpu".
    const std::string_view device = engine.backend_name();
    const bool on_gpu = device.starts_with("cuda");
    const bool on_sim = device == "sim";
    const std::string backend = on_gpu   ? std::string("CUDA")
                                : on_sim ? std::string("sim")
                                         : fmt::format("CPU {}", cpu::path_name(cpu::active_path()));
    // The KV cache's type under llama-bench's names (type_k, type_v: lower case).
    std::string kv_type(dtype_name(engine.kv_cache().type()));
    for (char& ch : kv_type) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (o.json) {
        for (const Row& r : rows) {
            nlohmann::json j = {{"engine", "strata"},
                                {"model", resolve_model_path(eo.model).filename().string()},
                                {"model_type", label},
                                {"size_bytes", bytes},
                                {"n_params", params},
                                {"backend", backend},
                                {"threads", engine.n_threads()},
                                {"type_k", kv_type},
                                {"type_v", kv_type},
                                {"test", r.test},
                                {"n_tokens", r.n_tokens},
                                {"batch", o.batch},
                                {"depth", o.depth},
                                {"predicted_ts", predicted_ts(r)},
                                {"reps", o.reps},
                                {"avg_ts", mean(r.ts)},
                                {"stddev_ts", stddev(r.ts)},
                                {"samples_ts", r.ts},
                                {"profile", engine.placement().hw_source}};
            // With a device: where its layers' KV cache is, and so who attends to it.
            if (const auto kv_on = engine.kv_placement()) j["kv_cache"] = std::string(runtime::kv_placement_name(*kv_on));
            if (!r.streamed_gbps.empty()) {
                j["weight_bytes_per_token"] = token_bytes;
                j["weights_gbps"] = weights_gbps(r);
                j["dram_read_gbps"] = hw.dram.read_gbps;
                if (on_gpu && hw.gpu) j["device_read_gbps"] = hw.gpu->mem_gbps;
                j["streamed_gbps"] = mean(r.streamed_gbps);
                j["samples_streamed_gbps"] = r.streamed_gbps;
                j["disk_read_gbps"] = hw.nvme.read_gbps;
                j["streamed_priced_gbps"] = streamed_read_gbps(engine.placement());  // the model file's, at the ring's depth
            }
            // The placement the planner weighed this one against (the CPU alone beside a device plan).
            if (const auto& alt = engine.placement().alternative)
                j["weighed"] = {{"against", alt->what}, {"decode_ts", alt->prediction.decode_tps_per_seq},
                                {"this_decode_ts", engine.placement().plan.prediction.decode_tps_per_seq}};
            // A device plan's CPU layers in the prompt's passes (op offload).
            if (const runtime::Placement& pl = engine.placement(); !pl.op_offload.runs.empty())
                j["op_offload"] = {{"cpu_layers", planner::format_runs(pl.op_offload.runs)},
                                   {"from_rows", pl.op_offload_rows},
                                   {"planner_rows", pl.op_offload.min_rows},
                                   {"why", pl.op_offload_why}};
            if (r.passes > 0) j["tokens_per_pass"] = r.tokens_per_pass();
            if (!r.expert_counts.empty()) j["expert_counts"] = r.expert_counts;
            if (r.shows_device_share(expert_plan)) {
                j["expert_device_share"] = runtime::RoutingStats::share(r.device_choices, r.expert_counts);
                j["predicted_expert_device_share"] = expert_plan.device_share_mean();
            }
            if (r.experts.hits + r.experts.misses > 0) {
                j["expert_hit_rate"] = r.experts.hit_rate();
                j["predicted_expert_hit_rate"] = expert_plan.hit_rate;
                j["expert_disk_bytes_per_token"] = expert_disk_per_token(r);
                j["predicted_expert_disk_bytes_per_token"] = expert_plan.nvme_bytes_per_token;
                j["expert_wait_ms_per_token"] = expert_wait_ms_per_token(r);
                j["expert_routing"] = expert_plan.routing;
            }
            std::printf("%s\n", j.dump().c_str());
        }
        return 0;
    }
    size_t w = 6;  // the test column fits the longest name
    for (const Row& r : rows) w = std::max(w, r.test.size());
    const std::string hdr = fmt::format("| {:<30} | {:>10} | {:>8} | {:<10} | {:>7} | {:>7} | {:>{}} | {:>20} |", "model",
                                        "size", "params", "backend", "threads", "type_kv", "test", w, "t/s");
    std::printf("%s\n", hdr.c_str());
    std::printf("|%s|%s|%s|%s|%s|%s|%s|%s|\n", std::string(32, '-').c_str(), std::string(12, '-').c_str(),
                std::string(10, '-').c_str(), std::string(12, '-').c_str(), std::string(9, '-').c_str(),
                std::string(9, '-').c_str(), std::string(w + 2, '-').c_str(), std::string(22, '-').c_str());
    for (const Row& r : rows)
        std::printf("%s\n",
                    fmt::format("| {:<30} | {:>6.2f} MiB | {:>7.2f}M | {:<10} | {:>7} | {:>7} | {:>{}} | {:>10.2f} ± {:>7.2f} |",
                                label, bytes / 1048576.0, params / 1e6, backend, engine.n_threads(), kv_type, r.test, w,
                                mean(r.ts), stddev(r.ts))
                        .c_str());
    std::printf("\nplan's prediction for these runs:");
    for (const Row& r : rows) std::printf(" %s %.2f t/s;", r.test.c_str(), predicted_ts(r));
    std::printf("\n");
    for (const Row& r : rows) {
        if (r.passes == 0) continue;
        std::printf("%s: %.2f tokens a pass (--spec %s)", r.test.c_str(), r.tokens_per_pass(), o.m.spec.c_str());
        // The plan's speed with speculation at the share of drafts kept here.
        if (r.drafted > 0) {
            const double kept = double(r.accepted) / double(r.drafted);
            std::printf("; the plan at acceptance %.2f: %s", kept, speculation_forecast(engine.placement(), kept, o.m.spec_depth).c_str());
        }
        std::printf("\n");
    }
    // A mixture of experts reads the experts one token chooses: the active weights.
    const char* weights_what = engine.hparams().moe.enabled() ? "active weights" : "weights";
    for (const Row& r : rows)
        if (!r.expert_counts.empty())
            std::printf("%s: %s\n", r.test.c_str(), routing_line(r.expert_counts, engine.hparams().moe.n_expert_used).c_str());
    for (const Row& r : rows)
        if (r.shows_device_share(expert_plan))
            std::printf("%s: %.1f%% of the chosen experts computed on the device's %d (plan %.1f%%)\n", r.test.c_str(),
                        100 * runtime::RoutingStats::share(r.device_choices, r.expert_counts), expert_plan.n_device(),
                        100 * expert_plan.device_share_mean());
    for (const Row& r : rows)
        if (r.experts.hits + r.experts.misses > 0)
            std::printf("%s: expert cache hit rate %.1f%% (plan %.1f%%, routing %s); %.2f MiB of experts from disk per "
                        "token (plan %.2f MiB), compute waiting %.2f ms per token for them\n",
                        r.test.c_str(), 100 * r.experts.hit_rate(), 100 * expert_plan.hit_rate, expert_plan.routing.c_str(),
                        expert_disk_per_token(r) / 1048576.0, expert_plan.nvme_bytes_per_token / 1048576.0,
                        expert_wait_ms_per_token(r));
    for (const Row& r : rows) {
        if (r.streamed_gbps.empty()) continue;
        if (on_gpu && hw.gpu)
            std::printf("%s: %s %.1f MiB per step -> %.2f GB/s = %.2f x device memory read %.0f GB/s\n", r.test.c_str(),
                        weights_what, token_bytes / 1048576.0, weights_gbps(r), weights_gbps(r) / hw.gpu->mem_gbps,
                        hw.gpu->mem_gbps);
        else
            std::printf("%s: %s %.1f MiB per step -> %.2f GB/s = %.2f x DRAM read %.2f GB/s\n", r.test.c_str(), weights_what,
                        token_bytes / 1048576.0, weights_gbps(r), weights_gbps(r) / hw.dram.read_gbps, hw.dram.read_gbps);
        // Against the rate the plan priced the ring's reads at (the model file's), and the probe's deepest.
        const double ring_gbps = streamed_read_gbps(engine.placement());
        if (mean(r.streamed_gbps) > 0)
            std::printf("%s: streamed from disk %.2f ± %.2f GB/s = %.2f x the model file's read at the ring's depth %.2f GB/s "
                        "(the probe's file: %.2f with 32 MiB in flight)\n", r.test.c_str(), mean(r.streamed_gbps),
                        stddev(r.streamed_gbps), mean(r.streamed_gbps) / ring_gbps, ring_gbps, hw.nvme.read_gbps);
        std::printf("(rates from %s)\n", engine.placement().hw_source.c_str());
    }
    return 0;
}

}  // namespace strata::cli
