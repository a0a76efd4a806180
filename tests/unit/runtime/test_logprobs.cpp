#include <catch2/catch.hpp>

#include <cmath>

#include "runtime/logprobs.h"

using namespace strata::runtime;

TEST_CASE("token log-probabilities are the log-softmax of the logits", "[unit][sampler]") {
    const std::vector<float> logits{1.0f, 3.0f, -2.0f, 3.0f, 0.5f};
    double z = 0;
    for (float l : logits) z += std::exp(double(l));
    const SampledLogprobs lp = token_logprobs(logits, 2, 3);
    CHECK(lp.chosen.token == 2);
    CHECK(lp.chosen.logprob == Approx(-2.0 - std::log(z)).epsilon(1e-6));
    REQUIRE(lp.top.size() == 3);
    // Most likely first; equal logits: the lower id first.
    CHECK(lp.top[0].token == 1);
    CHECK(lp.top[1].token == 3);
    CHECK(lp.top[2].token == 0);
    CHECK(lp.top[0].logprob == Approx(3.0 - std::log(z)).epsilon(1e-6));
    double total = 0;
    for (size_t t = 0; t < logits.size(); ++t) total += std::exp(token_logprobs(logits, int32_t(t), 0).chosen.logprob);
    CHECK(total == Approx(1.0).epsilon(1e-6));
    CHECK(token_logprobs(logits, 0, 0).top.empty());
    CHECK(token_logprobs(logits, 0, 99).top.size() == logits.size());
}
