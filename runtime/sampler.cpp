#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/grammar/grammar_constraint.h"

namespace strata::runtime {

namespace sampling {

void apply_penalties(std::vector<Candidate>& c, const std::deque<int32_t>& recent, const SamplerParams& p) {
    if (recent.empty() || (p.repeat_penalty == 1.0f && p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f))
        return;
    std::unordered_map<int32_t, int> counts;
    for (int32_t t : recent) ++counts[t];
    // Candidates are indexed by id while still unsorted (one per vocabulary entry).
    for (auto [tok, n] : counts) {
        if (tok < 0 || static_cast<size_t>(tok) >= c.size()) continue;
        float& l = c[tok].logit;
        l = l > 0 ? l / p.repeat_penalty : l * p.repeat_penalty;
        l -= static_cast<float>(n) * p.frequency_penalty + p.presence_penalty;
    }
}

void sort_and_top_k(std::vector<Candidate>& c, int32_t k) {
    auto by_logit = [](const Candidate& a, const Candidate& b) {
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    };
    if (k > 0 && static_cast<size_t>(k) < c.size()) {
        std::partial_sort(c.begin(), c.begin() + k, c.end(), by_logit);
        c.resize(k);
    } else {
        std::sort(c.begin(), c.end(), by_logit);
    }
}

void softmax(std::vector<Candidate>& c) {
    const float max_l = c.front().logit;
    double sum = 0;
    for (auto& x : c) sum += (x.p = std::exp(x.logit - max_l));
    for (auto& x : c) x.p = static_cast<float>(x.p / sum);
}

void top_p(std::vector<Candidate>& c, float p) {
    if (p >= 1.0f) return;
    softmax(c);
    double cum = 0;
    size_t keep = c.size();
    for (size_t i = 0; i < c.size(); ++i) {
        cum += c[i].p;
        if (cum >= p) {
            keep = i + 1;
            break;
        }
    }
    c.resize(keep);
}

void min_p(std::vector<Candidate>& c, float p) {
    if (p <= 0.0f) return;
    // Keep tokens whose probability is at least p times the most likely one's.
    const float cut = c.front().logit + std::log(p);
    size_t keep = 1;
    while (keep < c.size() && c[keep].logit >= cut) ++keep;
    c.resize(keep);
}

}  // namespace sampling

void check_sampler_params(const SamplerParams& p) {
    const std::pair<const char*, float> finite[] = {{"temperature", p.temperature},
                                                    {"top-p", p.top_p},
                                                    {"min-p", p.min_p},
                                                    {"repeat penalty", p.repeat_penalty},
                                                    {"presence penalty", p.presence_penalty},
                                                    {"frequency penalty", p.frequency_penalty}};
    for (const auto& [name, value] : finite)
        if (!std::isfinite(value)) throw UsageError(fmt::format("the {} {} is not a finite number", name, value), "give a number");
    if (!(p.repeat_penalty > 0))
        throw UsageError(fmt::format("the repeat penalty {} is not above 0", p.repeat_penalty), "give 1 for none, more to penalise");
    if (p.penalty_last_n < 0)
        throw UsageError(fmt::format("the penalties' window of {} tokens is negative", p.penalty_last_n), "give 0 (none) or more");
}

Sampler::Sampler(const SamplerParams& params) : Sampler(params, nullptr) {}

Sampler::Sampler(const SamplerParams& params, std::unique_ptr<GrammarConstraint> grammar)
    : params_(params), grammar_(std::move(grammar)), rng_(params.seed) {}

Sampler::~Sampler() = default;

void Sampler::accept(int32_t token) {
    if (params_.penalty_last_n <= 0) return;
    recent_.push_back(token);
    while (recent_.size() > static_cast<size_t>(params_.penalty_last_n)) recent_.pop_front();
}

void Sampler::accept_generated(int32_t token) {
    accept(token);
    if (grammar_) grammar_->accept(token);
}

void Sampler::reset() {
    recent_.clear();
    rng_.seed(params_.seed);
}

int32_t Sampler::sample(std::span<const float> logits) {
    const int32_t t = draw(logits, false);
    if (!grammar_ || grammar_->allows(t)) return t;
    masked_.assign(logits.begin(), logits.end());
    if (!grammar_->mask(masked_)) return -1;
    return draw(masked_, true);
}

int32_t Sampler::draw(std::span<const float> logits, bool masked) {
    const bool penalties = params_.repeat_penalty != 1.0f || params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f;
    // Greedy without penalties: the first largest logit, as the candidates below would give it
    // (a masked token's -infinity is never the largest while the grammar allows any).
    if (params_.temperature <= 0.0f && !penalties)
        return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    if (params_.temperature <= 0.0f) {
        cand_.resize(logits.size());
        for (size_t i = 0; i < logits.size(); ++i) cand_[i] = {static_cast<int32_t>(i), logits[i]};
        sampling::apply_penalties(cand_, recent_, params_);
        if (masked) std::erase_if(cand_, [](const Candidate& c) { return std::isinf(c.logit); });
        auto best = std::max_element(cand_.begin(), cand_.end(), [](const Candidate& a, const Candidate& b) {
            return a.logit < b.logit || (a.logit == b.logit && a.id > b.id);
        });
        return best->id;
    }
    distribution(logits, masked);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    return pick(u(rng_));
}

void Sampler::distribution(std::span<const float> logits, bool masked) {
    cand_.resize(logits.size());
    for (size_t i = 0; i < logits.size(); ++i) cand_[i] = {static_cast<int32_t>(i), logits[i]};
    sampling::apply_penalties(cand_, recent_, params_);
    if (masked) std::erase_if(cand_, [](const Candidate& c) { return std::isinf(c.logit); });
    sampling::sort_and_top_k(cand_, params_.top_k);
    sampling::top_p(cand_, params_.top_p);
    sampling::min_p(cand_, params_.min_p);
    for (auto& x : cand_) x.logit /= params_.temperature;
    sampling::softmax(cand_);
}

int32_t Sampler::pick(double r) const {
    double cum = 0;
    for (const auto& x : cand_) {
        cum += x.p;
        if (r < cum) return x.id;
    }
    return cand_.back().id;
}

int32_t Sampler::verify(std::span<const float> logits, std::span<const int32_t> drafts) {
    // Against certain guesses a plain draw is as exact: a grammar's tokens are drawn so.
    if (params_.temperature <= 0.0f || grammar_) return sample(logits);
    distribution(logits, false);
    // One uniform draw r against the candidates' cumulative probabilities, where a draft d's
    // interval is [lo, lo + p(d)): the first draft is kept with probability p(d1); once it is
    // rejected r is uniform over the other intervals, so the next is kept with its residual
    // probability p(d2) / (1 - p(d1)), and so on (q, each draft's point mass, leaves max(0, p - q)
    // = p without it). When all are rejected r picks from what remains, p without the drafts
    // renormalised. The token is the one sample() would draw from the same generator state.
    std::uniform_real_distribution<double> u(0.0, 1.0);
    const double r = u(rng_);
    for (const int32_t d : drafts) {
        double lo = 0;
        for (const auto& x : cand_) {
            if (x.id == d) {
                if (r >= lo && r < lo + x.p) return d;
                break;
            }
            lo += x.p;
        }
    }
    return pick(r);
}

}  // namespace strata::runtime
