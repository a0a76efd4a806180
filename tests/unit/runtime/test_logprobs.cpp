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

TEST_CASE("log-probabilities are shown with their tokens' text, never past it", "[unit][sampler]") {
    // Tokens 0..3 of 2, 3, 0 and 4 bytes: "ab" "cde" "" "fghi".
    const std::vector<size_t> bytes = {2, 3, 0, 4};
    ShownLogprobs shown([&](int32_t t) { return bytes[static_cast<size_t>(t)]; });
    std::vector<SampledLogprobs> generated(4);
    for (int32_t t = 0; t < 4; ++t) generated[static_cast<size_t>(t)].chosen = {t, -1.0f * static_cast<float>(t)};
    const auto ids = [](const std::vector<SampledLogprobs>& v) {
        std::vector<int32_t> out;
        for (const auto& s : v) out.push_back(s.chosen.token);
        return out;
    };
    shown.add(std::span(generated).first(2));
    CHECK(ids(shown.take(0)).empty());                            // no text yet
    CHECK(ids(shown.take(3)) == std::vector<int32_t>{0, 1});      // "abc": token 1 has begun
    shown.add(std::span(generated).subspan(2));
    CHECK(ids(shown.take(5)) == std::vector<int32_t>{2});         // "abcde": the empty token at its end too
    CHECK(ids(shown.take(5)).empty());                            // a stop string "fghi" held back: never shown
}
