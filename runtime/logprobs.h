#pragma once
// Log-probabilities of generated tokens, as OpenAI's `logprobs` reports them: the log-softmax of
// the model's logits (before penalties, temperature or a grammar) at the chosen token, and the
// most likely tokens of the same distribution.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
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

// Log-probabilities held until their token's text is shown: a token whose text begins past the
// reply's text (one of a stop string, which the text ends before) is never reported.
class ShownLogprobs {
public:
    // `piece_bytes(token)`: the length of a token's text.
    explicit ShownLogprobs(std::function<size_t(int32_t)> piece_bytes) : piece_bytes_(std::move(piece_bytes)) {}
    void add(std::span<const SampledLogprobs> generated);
    // The reply's text shown so far is `text_bytes` long: the held log-probabilities of tokens
    // that begin within it (and of empty tokens at its end), in order.
    std::vector<SampledLogprobs> take(size_t text_bytes);

private:
    std::function<size_t(int32_t)> piece_bytes_;
    std::deque<SampledLogprobs> held_;
    size_t next_start_ = 0;  // where the first held token's text begins
};

}  // namespace strata::runtime
