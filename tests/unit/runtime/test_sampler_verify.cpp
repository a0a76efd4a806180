// Speculative sampling's rejection step keeps the sampler's distribution: checked by chi-square
// against the exact probabilities, for a draft the sampler likes and for one it would rarely draw.
#include <catch2/catch.hpp>

#include <cmath>

#include "runtime/sampler.h"
#include "tests/support/chi_square.h"

using namespace strata::runtime;

TEST_CASE("sampler: verifying a drafted token draws from the sampling distribution", "[unit][sampler][spec]") {
    const std::vector<float> logits{1.0f, 2.5f, 0.2f, 2.0f, -1.0f, 1.5f};
    SamplerParams sp;
    sp.temperature = 0.9f;
    sp.top_k = 0;
    sp.top_p = 1.0f;
    sp.min_p = 0.0f;
    std::vector<double> p(logits.size());
    double sum = 0;
    for (size_t i = 0; i < p.size(); ++i) sum += (p[i] = std::exp(logits[i] / sp.temperature));
    for (double& x : p) x /= sum;
    const int n = 20000;
    for (const int32_t draft : {1, 3, 4}) {
        INFO("draft " << draft << " of probability " << p[size_t(draft)]);
        Sampler s(sp);
        std::vector<double> seen(p.size()), expected(p.size());
        for (int i = 0; i < n; ++i) ++seen[size_t(s.verify(logits, draft))];
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
    CHECK(s.verify(logits, 1) == 1);
    CHECK(s.verify(logits, 2) == 1);
}

TEST_CASE("sampler: a verified draw is the token a plain draw gives from the same seed", "[unit][sampler][spec]") {
    const std::vector<float> logits{1.0f, 2.5f, 0.2f, 2.0f, -1.0f, 1.5f};
    SamplerParams sp;
    sp.temperature = 0.9f;
    Sampler plain(sp), verifying(sp);
    for (int i = 0; i < 500; ++i) CHECK(verifying.verify(logits, i % 6) == plain.sample(logits));
}
