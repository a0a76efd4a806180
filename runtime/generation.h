#pragma once
// One request's generation, a token at a time: the one place where a sequence is sampled (held
// to its grammar) and where it ends, for every command (the scheduler drives it). Each step
// hands it a row of logits; it draws the next token and decides whether the sequence goes on:
// end of generation, a stop string, a grammar's dead end, the caller's cancellation, n_predict
// and the context limit all end it here. A speculative step hands it the rows of its verified
// draft tokens one at a time, each with its draft token, and stops at the first whose draw
// differs from the draft (runtime/scheduler_spec.cpp).
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/grammar/gbnf.h"
#include "runtime/logprobs.h"
#include "runtime/reasoning_budget.h"
#include "runtime/sampler.h"
#include "runtime/text_stream.h"

namespace strata::models { class Tokenizer; }

namespace strata::runtime {

struct GenerateParams {
    int32_t n_predict = 128;
    SamplerParams sampler;
    std::vector<std::string> stop;
    bool ignore_eos = false;
    // The output is held to this grammar (runtime/grammar/): from its first token, or when
    // triggers are given from where the output first writes one of them.
    std::shared_ptr<const Grammar> grammar;
    std::vector<std::string> grammar_triggers;
    // Where in the output a trigger may start (after a reasoning model's reasoning), npos while
    // none may; empty: anywhere.
    std::function<size_t(std::string_view text)> grammar_triggers_from;
    int n_logprobs = -1;  // >= 0: each generated token's log-probability and this many alternatives
    // Ends the output (stop_reason "stop") once this is true of the text released so far, as a
    // stop string would: a reply with tools ends at a call that repeats an earlier one.
    std::function<bool(std::string_view text)> ends_output;
    // A cap on the reasoning's tokens (not under a grammar that holds the whole reply).
    ReasoningBudgetParams reasoning_budget;
};

struct GenerateResult {
    std::vector<int32_t> prompt_tokens;
    std::vector<int32_t> tokens;  // generated ids
    std::string text;             // generated text, ending before any stop string
    std::string stop_reason;      // "eos", "stop", "length", "context", "cancelled", "error"
    std::string stop_string;      // with "stop": the stop string the text ends before (empty: ends_output ended it)
    std::string error;            // what went wrong, when stop_reason is "error"
    int cached_tokens = 0;        // prompt tokens whose KV was reused instead of evaluated
    double prefill_seconds = 0, decode_seconds = 0;
    double prefill_tokens_per_s() const { return prefill_seconds > 0 ? prompt_tokens.size() / prefill_seconds : 0; }
    int n_decode_evals = 0;       // decoding passes (the first token comes from the prefill)
    int n_drafted = 0;            // draft tokens those passes verified (speculative decoding)
    int n_accepted = 0;           // of which the target kept these: each a token without a pass of its own
    int decode_tokens() const { return n_decode_evals + n_accepted; }
    double decode_tokens_per_s() const { return decode_seconds > 0 ? decode_tokens() / decode_seconds : 0; }
    double tokens_per_pass() const { return n_decode_evals > 0 ? double(decode_tokens()) / n_decode_evals : 0; }
    std::vector<SampledLogprobs> logprobs;  // one per generated token, when asked for
    std::vector<float> embedding;           // an embedding request's unit vector
};

class Generation {
public:
    // Text as soon as it is safe to show (stop strings held back); returning false cancels.
    using OnText = std::function<bool(std::string_view)>;
    using OnLogprobs = std::function<void(const SampledLogprobs&)>;

    // Generates after `prompt` (the sampler's penalties count it) into `result`.
    Generation(const GenerateParams& params, const models::Tokenizer& tok, std::unique_ptr<Sampler> sampler,
               std::span<const int32_t> prompt, GenerateResult& result, OnText on_text = {}, OnLogprobs on_logprobs = {});

    // The sequence's next token from its row of n_vocab logits, with `held` positions in its
    // KV cache of n_ctx: the token to evaluate next, or nullopt when the generation has ended
    // (the result's stop_reason says why; "length" unless another reason came first).
    // With `drafts`, the tokens a drafter guessed here (its best guess first): drawn by the
    // sampler's rejection step (Sampler::verify), which keeps the draw's distribution.
    std::optional<int32_t> accept(std::span<const float> logits, int64_t held, int64_t n_ctx, std::span<const int32_t> drafts = {});
    // At the end: the text still held back is shown (unless it stopped, failed or was
    // cancelled) and the result's text completed.
    void finish();

private:
    const GenerateParams& params_;
    const models::Tokenizer& tok_;
    std::unique_ptr<Sampler> sampler_;
    TextStream stream_;
    OnText on_text_;
    OnLogprobs on_logprobs_;
    GenerateResult& result_;
    std::optional<ReasoningBudget> budget_;
};

}  // namespace strata::runtime
