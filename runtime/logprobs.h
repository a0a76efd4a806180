#pragma once
// Log-probabilities of generated tokens, as OpenAI's `logprobs` reports them: the log-softmax of
// the model's logits (before penalties, temperature or a grammar) at the chosen token, and the
// most likely tokens of the same distribution.
#include <cstdint>
#include <span>
#include <vector>

namespace strata::runtime {

struct TokenLogprob {
    int32_t token = -1;
    float logprob = 0;
};

struct SampledLogprobs {
    TokenLogprob chosen;
    std::vector<TokenLogprob> top;  // most likely first
};

// The most alternatives a request may ask for (OpenAI's top_logprobs limit).
inline constexpr int kMaxTopLogprobs = 20;

// `chosen`'s log-probability under softmax(logits) and the n_top most likely tokens (ties: the lower id first).
SampledLogprobs token_logprobs(std::span<const float> logits, int32_t chosen, int n_top);

}  // namespace strata::runtime
