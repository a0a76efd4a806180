// Speculative sampling's rejection step keeps the sampler's distribution: checked by chi-square
// against the exact probabilities, for a draft the sampler likes and for one it would rarely draw,
// and for a tree's two or three children at one place, tried in turn; a wrong rule (a later
// child kept with its plain probability instead of the residual's) is caught by the same check.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <random>

#include "runtime/sampler.h"
#include "tests/support/chi_square.h"

using namespace strata::runtime;

namespace {
const std::vector<float> kLogits{1.0f, 2.5f, 0.2f, 2.0f, -1.0f, 1.5f};

SamplerParams plain_temperature() {
    SamplerParams sp;
    sp.temperature = 0.9f;
    sp.top_k = 0;
    sp.top_p = 1.0f;
    sp.min_p = 0.0f;
    return sp;
}

// The exact distribution of kLogits at plain_temperature().
std::vector<double> exact() {
    std::vector<double> p(kLogits.size());
    double sum = 0;
    for (size_t i = 0; i < p.size(); ++i) sum += (p[i] = std::exp(kLogits[i] / plain_temperature().temperature));
    for (double& x : p) x /= sum;
    return p;
}

// The multi-candidate step written out with a fresh uniform per trial: each child kept with
// its residual probability (or, `wrong`, with its plain one), then a draw from what remains.
int32_t sequential(const std::vector<double>& p, std::span<const int32_t> children, bool wrong, std::mt19937_64& rng) {
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::vector<double> rest = p;
    double left = 1;
    for (const int32_t c : children) {
        const double keep = wrong ? p[size_t(c)] : rest[size_t(c)] / left;
        if (u(rng) < keep) return c;
        left -= rest[size_t(c)];
        rest[size_t(c)] = 0;
    }
    double r = u(rng) * left;
    for (size_t t = 0; t < rest.size(); ++t)
        if ((r -= rest[t]) < 0) return static_cast<int32_t>(t);
    return static_cast<int32_t>(rest.size()) - 1;
}

strata::test::ChiSquare against_exact(const std::vector<double>& seen, int n) {
    const auto p = exact();
    std::vector<double> expected(p.size());
    for (size_t i = 0; i < p.size(); ++i) expected[i] = n * p[i];
    return strata::test::chi_square(seen, expected);
}
}  // namespace

TEST_CASE("sampler: verifying a drafted token draws from the sampling distribution", "[unit][sampler][spec]") {
    const std::vector<float>& logits = kLogits;
    const SamplerParams sp = plain_temperature();
    const auto p = exact();
    const int n = 20000;
    for (const int32_t draft : {1, 3, 4}) {
        INFO("draft " << draft << " of probability " << p[size_t(draft)]);
        Sampler s(sp);
        std::vector<double> seen(p.size()), expected(p.size());
        for (int i = 0; i < n; ++i) ++seen[size_t(s.verify(logits, std::array{draft}))];
        for (size_t i = 0; i < p.size(); ++i) expected[i] = n * p[i];
        const auto c = strata::test::chi_square(seen, expected);
        INFO("chi-square " << c.stat << " on " << c.df << " degrees of freedom");
        CHECK(c.stat < c.bound());
    }
}

TEST_CASE("sampler: verifying greedily gives the argmax whatever the draft", "[unit][sampler][spec]") {
    SamplerParams sp;
    sp.temperature = 0;
    Sampler s(sp);
    const std::vector<float> logits{0.5f, 3.0f, 1.0f};
    CHECK(s.verify(logits, std::array{1}) == 1);
    CHECK(s.verify(logits, std::array{2, 0}) == 1);
}

TEST_CASE("sampler: a verified draw is the token a plain draw gives from the same seed", "[unit][sampler][spec]") {
    const std::vector<float> logits{1.0f, 2.5f, 0.2f, 2.0f, -1.0f, 1.5f};
    SamplerParams sp;
    sp.temperature = 0.9f;
    Sampler plain(sp), verifying(sp);
    for (int i = 0; i < 500; ++i) CHECK(verifying.verify(logits, std::array{i % 6, (i + 1) % 6}) == plain.sample(logits));
}

TEST_CASE("sampler: a tree's children tried in turn draw from the sampling distribution; a wrong rule does not",
          "[unit][sampler][spec]") {
    const int n = 20000;
    const std::vector<std::vector<int32_t>> trees{{1, 3}, {3, 1, 5}, {5, 1}};
    for (const auto& children : trees) {
        INFO("children " << children[0] << ", " << children[1]);
        Sampler s(plain_temperature());
        std::mt19937_64 rng(7);
        const auto p = exact();
        std::vector<double> seen(kLogits.size()), textbook(kLogits.size()), wrong(kLogits.size());
        for (int i = 0; i < n; ++i) {
            ++seen[size_t(s.verify(kLogits, children))];
            ++textbook[size_t(sequential(p, children, false, rng))];
            ++wrong[size_t(sequential(p, children, true, rng))];
        }
        const auto c = against_exact(seen, n), t = against_exact(textbook, n), w = against_exact(wrong, n);
        INFO("chi-square: sampler " << c.stat << ", residual rule " << t.stat << ", wrong rule " << w.stat << " (bound " << c.bound() << ")");
        CHECK(c.stat < c.bound());
        CHECK(t.stat < t.bound());
        CHECK(w.stat > w.bound());
    }
}
