#pragma once
// Token sampling from logits: penalties, then top-k, top-p, min-p and temperature, then a
// seeded draw; greedy (argmax) when the temperature is 0. The order follows llama.cpp's
// default chain so that the same flags mean the same thing to users of both. With a grammar
// (runtime/grammar/grammar_constraint.h) a drawn token it refuses is drawn again from the
// tokens it allows.
#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <span>
#include <vector>

namespace strata::runtime {

struct SamplerParams {
    float temperature = 0.8f;       // <= 0: greedy
    int32_t top_k = 40;             // <= 0: off
    float top_p = 0.95f;            // >= 1: off
    float min_p = 0.05f;            // <= 0: off
    float repeat_penalty = 1.0f;    // 1: off; divides positive logits of recent tokens
    float presence_penalty = 0.0f;  // subtracted once from each recent token
    float frequency_penalty = 0.0f; // subtracted per occurrence of each recent token
    int32_t penalty_last_n = 64;    // how many recent tokens the penalties look at
    uint64_t seed = 0xC0FFEE;
};

// Throws UsageError naming the first parameter no sampling chain can use: a temperature, top-p,
// min-p or penalty that is not a finite number, a repeat penalty not above 0, a negative
// penalty window. (Values past a parameter's useful range mean "off" and pass.)
void check_sampler_params(const SamplerParams& p);

struct Candidate {
    int32_t id;
    float logit;
    float p = 0.0f;
};

class GrammarConstraint;

// Why a sequence ends when sample() finds no token its grammar allows.
inline constexpr const char* kGrammarDeadEnd = "the grammar allows no token of the vocabulary here";
inline constexpr const char* kNanOutput =
    "the model computed values that are not numbers (NaN): the file's weights or hyperparameters are broken; "
    "check it against its source, or download it again";

class Sampler {
public:
    explicit Sampler(const SamplerParams& params);
    Sampler(const SamplerParams& params, std::unique_ptr<GrammarConstraint> grammar);
    ~Sampler();
    // Picks the next token from a row of n_vocab logits (not modified); -1 when the grammar
    // allows no token.
    int32_t sample(std::span<const float> logits);
    // Speculative decoding's rejection step for a drafter's certain guesses `drafts` at one
    // place (a draft tree's children there, its best guess first): each tried in turn, kept
    // with its probability under the sampling chain renormalised over the tokens not yet
    // rejected (the first with p(d1), the next with p(d2) / (1 - p(d1)), ...), and when all are
    // rejected a token of the residual distribution (p without them, renormalised); so the token
    // returned has exactly sample()'s distribution. Drawn with sample()'s one uniform, it is the
    // very token sample() would give (seeded runs repeat with or without drafts). Greedy, or
    // with a grammar: sample().
    int32_t verify(std::span<const float> logits, std::span<const int32_t> drafts);
    // Records a token of the prompt for the penalties.
    void accept(int32_t token);
    // Records a generated token: the penalties and the grammar.
    void accept_generated(int32_t token);
    void reset();
    const SamplerParams& params() const { return params_; }

private:
    // The sampling chain over `logits`; when `masked`, tokens at -infinity are never drawn.
    int32_t draw(std::span<const float> logits, bool masked);
    // The chain up to the final probabilities, in cand_ (temperature > 0).
    void distribution(std::span<const float> logits, bool masked);
    // The candidate of cand_ whose cumulative interval holds a uniform draw r in [0, 1).
    int32_t pick(double r) const;

    SamplerParams params_;
    std::unique_ptr<GrammarConstraint> grammar_;
    std::mt19937_64 rng_;
    std::deque<int32_t> recent_;
    std::vector<Candidate> cand_;
    std::vector<float> masked_;
};

// The stages, exposed for tests. Each keeps the candidates sorted by logit, descending.
namespace sampling {
void apply_penalties(std::vector<Candidate>& c, const std::deque<int32_t>& recent, const SamplerParams& p);
void sort_and_top_k(std::vector<Candidate>& c, int32_t k);
void softmax(std::vector<Candidate>& c);  // fills p; expects sorted candidates
void top_p(std::vector<Candidate>& c, float p);
void min_p(std::vector<Candidate>& c, float p);
}  // namespace sampling

}  // namespace strata::runtime
