#include "runtime/engine.h"

#include <algorithm>

#include <fmt/format.h>

#include "cpu/thread_pool.h"
#include "runtime/core/error.h"
#include "runtime/core/log.h"
#include "runtime/forward.h"
#include "runtime/kv_cache.h"
#include "runtime/model_paths.h"
#include "runtime/placement.h"
#include "runtime/text_stream.h"
#include "runtime/weight_store.h"
#include "storage/budget.h"

namespace strata {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
}  // namespace

Engine::Engine(const EngineOptions& opts)
    : file_(GgufFile::open(resolve_model_path(opts.model))),
      hp_(Hparams::from_gguf(file_)),
      tok_(Tokenizer::from_gguf(file_)),
      pool_(std::make_unique<cpu::ThreadPool>(opts.n_threads)),
      dram_(std::make_unique<storage::MemoryBudget>("DRAM", opts.dram_budget ? opts.dram_budget : UINT64_MAX,
                                                    "--dram")) {
    if (opts.n_ctx < 0) throw UsageError(fmt::format("context size {} is negative", opts.n_ctx));
    if (opts.prefetch_depth < 1) throw UsageError(fmt::format("--prefetch {} must be at least 1", opts.prefetch_depth));
    const int n_ctx = opts.n_ctx > 0 ? opts.n_ctx : std::min(hp_.n_ctx_train, 4096);
    kv_ = std::make_unique<KvCache>(hp_.n_layer, n_ctx, hp_.n_embd_kv());
    // What the forward pass holds besides weights: the KV cache, activations and one row of logits.
    const uint64_t working = kv_->bytes() + Forward::activation_bytes(hp_) + uint64_t(hp_.n_vocab) * sizeof(float);
    // The planner decides which layers stay resident once the store knows their sizes.
    PlacementOptions po;
    po.given = opts.plan ? &*opts.plan : nullptr;
    po.n_ctx = n_ctx;
    po.n_predict = opts.n_predict;
    po.on_plan = opts.on_plan;
    weights_ = std::make_unique<WeightStore>(file_, hp_, *dram_, working, opts.prefetch_depth,
                                             [&](const ResidencyInput& in) {
                                                 placement_ = std::make_unique<Placement>(place(file_, in, po));
                                                 return placement_->residency;
                                             });
    working_ = storage::Reservation(*dram_, working, "KV cache and activations");
    fwd_ = std::make_unique<Forward>(hp_, *weights_);
    STRATA_LOG_INFO("model {}: {} layers, {} embd, {} heads ({} kv), {} of weights, context {}, {} threads; {}",
                    arch_name(hp_.arch), hp_.n_layer, hp_.n_embd, hp_.n_head, hp_.n_head_kv,
                    storage::format_bytes(weights_->weights().total_bytes()), n_ctx, pool_->n_threads(),
                    opts.dram_budget ? dram_->describe() : std::string("no DRAM limit"));
}

Engine::~Engine() = default;

int Engine::n_ctx() const { return kv_->n_ctx(); }
int Engine::n_past() const { return kv_->n_past(); }
int Engine::n_threads() const { return pool_->n_threads(); }
void Engine::reset() { kv_->truncate(0); }
void Engine::truncate(int n) { kv_->truncate(n); }

std::span<const float> Engine::eval(std::span<const int32_t> tokens, bool all_logits) {
    pool_->run([&] { fwd_->eval(tokens, *kv_, logits_, all_logits); });
    return logits_;
}

GenerateResult Engine::generate(std::span<const int32_t> prompt, const GenerateParams& params,
                                const std::function<bool(std::string_view)>& on_text) {
    GenerateResult r;
    r.prompt_tokens.assign(prompt.begin(), prompt.end());
    if (prompt.empty()) throw UsageError("the prompt is empty", "give some text with -p or on standard input");
    if (params.n_predict < 0) throw UsageError(fmt::format("-n {} is negative", params.n_predict));
    const int64_t needed = static_cast<int64_t>(n_past()) + static_cast<int64_t>(prompt.size());
    if (needed >= n_ctx())
        throw UsageError(fmt::format("the prompt has {} tokens, but the context holds {} ({} already used)",
                                     prompt.size(), n_ctx(), n_past()),
                         "shorten the prompt or raise --ctx");

    Sampler sampler(params.sampler);
    for (int32_t t : prompt) sampler.accept(t);
    TextStream stream(params.stop);
    auto emit = [&](const std::string& s) { return s.empty() || !on_text || on_text(s); };

    auto t0 = Clock::now();
    std::span<const float> logits = eval(prompt);
    r.prefill_seconds = seconds_since(t0);

    r.stop_reason = "length";
    t0 = Clock::now();
    for (int i = 0; i < params.n_predict; ++i) {
        const int32_t tok = sampler.sample(logits.subspan(0, hp_.n_vocab));
        if (!params.ignore_eos && tok_->is_eog(tok)) {
            r.stop_reason = "eos";
            break;
        }
        r.tokens.push_back(tok);
        sampler.accept(tok);
        const bool keep_going = emit(stream.push(tok_->piece(tok)));
        if (stream.stopped()) {
            r.stop_reason = "stop";
            break;
        }
        if (!keep_going) {
            r.stop_reason = "cancelled";
            break;
        }
        if (i + 1 == params.n_predict) break;
        if (n_past() >= n_ctx()) {
            r.stop_reason = "context";
            break;
        }
        logits = eval({&tok, 1});
    }
    r.decode_seconds = seconds_since(t0);
    if (!stream.stopped()) emit(stream.flush());
    r.text = stream.text();
    return r;
}

}  // namespace strata
