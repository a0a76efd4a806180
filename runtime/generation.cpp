#include "runtime/generation.h"

#include <algorithm>
#include <cmath>

#include "models/tokenizer.h"

namespace strata::runtime {

namespace {
// Scores that are not numbers: a file whose weights or hyperparameters are broken (a NaN in any
// layer reaches every logit through the residual stream), never a draw of <unk> after <unk>.
bool has_nan(std::span<const float> logits) {
    return std::any_of(logits.begin(), logits.end(), [](float v) { return std::isnan(v); });
}
}  // namespace

Generation::Generation(const GenerateParams& params, const models::Tokenizer& tok, std::unique_ptr<Sampler> sampler,
                       std::span<const int32_t> prompt, GenerateResult& result, OnText on_text, OnLogprobs on_logprobs)
    : params_(params), tok_(tok), sampler_(std::move(sampler)), stream_(params.stop), on_text_(std::move(on_text)),
      on_logprobs_(std::move(on_logprobs)), result_(result) {
    for (int32_t t : prompt) sampler_->accept(t);
    result_.stop_reason = "length";
    // A grammar that holds the whole reply could refuse the closer; a lazy one starts after it.
    const ReasoningBudgetParams& b = params.reasoning_budget;
    if (b.capped() && (!params.grammar || !params.grammar_triggers.empty())) {
        // The closer's markers are control tokens; the message, a client's text, is read as text.
        const models::TextRange message{0, b.message.size()};
        budget_.emplace(b.tokens, *b.style,
                        tok.encode(b.message + std::string(models::reasoning_closer(*b.style)), false, true, false, {&message, 1}));
    }
}

std::optional<int32_t> Generation::accept(std::span<const float> logits, int64_t held, int64_t n_ctx, std::span<const int32_t> drafts) {
    GenerateResult& r = result_;
    if (static_cast<int32_t>(r.tokens.size()) >= params_.n_predict) return std::nullopt;  // n_predict 0: the prompt only
    if (has_nan(logits.first(std::min<size_t>(logits.size(), static_cast<size_t>(tok_.n_vocab()))))) {
        r.stop_reason = "error";
        r.error = kNanOutput;
        return std::nullopt;
    }
    const std::optional<int32_t> forced = budget_ ? budget_->forced() : std::nullopt;
    const int32_t t = forced ? *forced : drafts.empty() ? sampler_->sample(logits) : sampler_->verify(logits, drafts);
    if (t < 0) {
        r.stop_reason = "error";
        r.error = kGrammarDeadEnd;
        return std::nullopt;
    }
    // A grammar's end is the end: its output is whole.
    if ((!params_.ignore_eos || params_.grammar) && tok_.is_eog(t)) {
        r.stop_reason = "eos";
        return std::nullopt;
    }
    if (params_.n_logprobs >= 0) {
        r.logprobs.push_back(token_logprobs(logits, t, params_.n_logprobs));
        if (on_logprobs_) on_logprobs_(r.logprobs.back());
    }
    r.tokens.push_back(t);
    sampler_->accept_generated(t);
    if (budget_) budget_->accept(tok_.piece(t));
    const std::string text = stream_.push(tok_.piece(t));
    const bool keep_going = text.empty() || !on_text_ || on_text_(text);
    if (stream_.stopped() || (params_.ends_output && !text.empty() && params_.ends_output(stream_.text()))) {
        r.stop_reason = "stop";
        return std::nullopt;
    }
    if (!keep_going) {
        r.stop_reason = "cancelled";
        return std::nullopt;
    }
    if (static_cast<int32_t>(r.tokens.size()) == params_.n_predict) return std::nullopt;  // "length"
    if (held >= n_ctx) {
        r.stop_reason = "context";
        return std::nullopt;
    }
    return t;
}

void Generation::finish() {
    GenerateResult& r = result_;
    if (r.stop_reason != "error" && r.stop_reason != "cancelled" && !stream_.stopped()) {
        const std::string rest = stream_.flush();
        if (!rest.empty() && on_text_) on_text_(rest);
    }
    r.text = stream_.text();
    r.stop_string = stream_.stop_string();
    // Only the tokens whose text the reply shows: not those of the stop string it ends before.
    if (!r.logprobs.empty()) {
        ShownLogprobs shown([this](int32_t t) { return tok_.piece(t).size(); });
        shown.add(r.logprobs);
        r.logprobs = shown.take(r.text.size());
    }
}

}  // namespace strata::runtime
