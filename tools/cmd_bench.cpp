// `strata bench`: prompt processing and generation speed in llama-bench's shape, so the numbers
// compare directly with llama.cpp's (bench/peer_llamacpp.py runs llama.cpp the same way).
//   pp<P>  evaluate P random tokens from an empty KV cache in one call (only the last token's
//          logits are computed); t/s = P / seconds.
//   tg<N>  from an empty KV cache, N single-token evaluations; t/s = N / seconds.
// One untimed warm-up of each test runs first; the table shows mean ± sample stddev over -r reps.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cpu/cpu_features.h"
#include "runtime/core/error.h"
#include "tools/cli_options.h"

namespace strata::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct Row {
    std::string test;
    int n_tokens = 0;
    std::vector<double> ts;  // tokens/s of each rep
    double mean() const {
        double s = 0;
        for (double v : ts) s += v;
        return ts.empty() ? 0 : s / ts.size();
    }
    double stddev() const {
        if (ts.size() < 2) return 0;
        const double m = mean();
        double s = 0;
        for (double v : ts) s += (v - m) * (v - m);
        return std::sqrt(s / (ts.size() - 1));
    }
};

// "llama 135M Q4_1": architecture, parameter count, the type most weight bytes are in.
std::string model_label(const Engine& e, uint64_t& bytes, uint64_t& params) {
    std::map<DType, uint64_t> by_type;
    bytes = params = 0;
    for (const TensorInfo& t : e.file().tensors()) {
        bytes += t.nbytes;
        params += static_cast<uint64_t>(t.nelements());
        if (t.n_dims >= 2) by_type[t.type] += t.nbytes;
    }
    DType main = DType::F32;
    uint64_t best = 0;
    for (const auto& [type, n] : by_type)
        if (n > best) best = n, main = type;
    const std::string size = params >= 1'000'000'000 ? fmt::format("{:.1f}B", params / 1e9)
                                                     : fmt::format("{}M", (params + 500'000) / 1'000'000);
    return fmt::format("{} {} {}", arch_name(e.hparams().arch), size, dtype_name(main));
}

}  // namespace

int run_bench(const BenchOptions& o) {
    if (o.n_prompt < 0 || o.n_gen < 0) throw UsageError("-p and -n must not be negative");
    if (o.reps < 1) throw UsageError(fmt::format("-r {} is not a positive number of repetitions", o.reps));
    if (o.n_prompt == 0 && o.n_gen == 0) throw UsageError("nothing to measure: -p and -n are both 0");
    EngineOptions eo = o.m.engine();
    if (eo.n_ctx == 0) eo.n_ctx = std::max(16, o.n_prompt + o.n_gen);
    eo.n_predict = o.n_gen;
    Engine engine(eo);
    if (o.n_prompt > engine.n_ctx() || o.n_gen > engine.n_ctx())
        throw UsageError(fmt::format("-p {} / -n {} do not fit the context of {}", o.n_prompt, o.n_gen, engine.n_ctx()),
                         "raise --ctx");

    const int n_vocab = engine.hparams().n_vocab;
    std::mt19937 rng(1234);
    std::uniform_int_distribution<int32_t> token(0, n_vocab - 1);
    auto run_pp = [&](int n) {
        std::vector<int32_t> toks(n);
        for (auto& t : toks) t = token(rng);
        engine.reset();
        const auto t0 = Clock::now();
        engine.eval(toks);
        return std::chrono::duration<double>(Clock::now() - t0).count();
    };
    auto run_tg = [&](int n) {
        engine.reset();
        const auto t0 = Clock::now();
        for (int i = 0; i < n; ++i) {
            const int32_t t = token(rng);
            engine.eval({&t, 1});
        }
        return std::chrono::duration<double>(Clock::now() - t0).count();
    };

    std::vector<Row> rows;
    if (o.n_prompt > 0) rows.push_back({fmt::format("pp{}", o.n_prompt), o.n_prompt, {}});
    if (o.n_gen > 0) rows.push_back({fmt::format("tg{}", o.n_gen), o.n_gen, {}});
    for (Row& r : rows) {
        const bool pp = r.test[0] == 'p';
        pp ? run_pp(r.n_tokens) : run_tg(std::min(r.n_tokens, 32));  // warm-up
        for (int i = 0; i < o.reps; ++i) r.ts.push_back(r.n_tokens / (pp ? run_pp(r.n_tokens) : run_tg(r.n_tokens)));
    }

    uint64_t bytes = 0, params = 0;
    const std::string label = model_label(engine, bytes, params);
    const std::string backend = fmt::format("CPU {}", cpu::path_name(cpu::active_path()));
    if (o.json) {
        for (const Row& r : rows) {
            nlohmann::json j = {{"engine", "strata"},
                                {"model", eo.model.empty() ? std::string() : eo.model.filename().string()},
                                {"model_type", label},
                                {"size_bytes", bytes},
                                {"n_params", params},
                                {"backend", backend},
                                {"threads", engine.n_threads()},
                                {"test", r.test},
                                {"n_tokens", r.n_tokens},
                                {"reps", o.reps},
                                {"avg_ts", r.mean()},
                                {"stddev_ts", r.stddev()},
                                {"samples_ts", r.ts}};
            std::printf("%s\n", j.dump().c_str());
        }
        return 0;
    }
    const std::string hdr = fmt::format("| {:<30} | {:>10} | {:>8} | {:<10} | {:>7} | {:>6} | {:>20} |", "model", "size",
                                        "params", "backend", "threads", "test", "t/s");
    std::printf("%s\n", hdr.c_str());
    std::printf("|%s|%s|%s|%s|%s|%s|%s|\n", std::string(32, '-').c_str(), std::string(12, '-').c_str(),
                std::string(10, '-').c_str(), std::string(12, '-').c_str(), std::string(9, '-').c_str(),
                std::string(8, '-').c_str(), std::string(22, '-').c_str());
    for (const Row& r : rows)
        std::printf("%s\n", fmt::format("| {:<30} | {:>6.2f} MiB | {:>7.2f}M | {:<10} | {:>7} | {:>6} | {:>10.2f} ± {:>7.2f} |",
                                        label, bytes / 1048576.0, params / 1e6, backend, engine.n_threads(), r.test,
                                        r.mean(), r.stddev())
                                .c_str());
    return 0;
}

}  // namespace strata::cli
