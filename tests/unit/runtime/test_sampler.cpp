#include <catch2/catch.hpp>

#include <cmath>
#include <map>

#include "runtime/sampler.h"

using namespace strata;
using namespace strata::runtime;

namespace {
SamplerParams plain(float temp) {
    SamplerParams p;
    p.temperature = temp;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    return p;
}
}  // namespace

TEST_CASE("greedy sampling picks the largest logit, lowest id on ties", "[unit][sampler]") {
    Sampler s(plain(0.0f));
    CHECK(s.sample(std::vector<float>{0.1f, 3.0f, -2.0f, 2.9f}) == 1);
    CHECK(s.sample(std::vector<float>{5.0f, 1.0f, 5.0f}) == 0);
}

TEST_CASE("sampling at temperature 1 follows the softmax distribution", "[unit][sampler]") {
    const std::vector<float> logits{0.0f, 1.0f, 2.0f, -1.0f};
    double z = 0;
    for (float l : logits) z += std::exp(l);
    Sampler s(plain(1.0f));
    std::map<int, int> hits;
    const int n = 40000;
    for (int i = 0; i < n; ++i) ++hits[s.sample(logits)];
    for (size_t i = 0; i < logits.size(); ++i) {
        const double p = std::exp(logits[i]) / z;
        const double sd = std::sqrt(p * (1 - p) / n);
        INFO("token " << i << " expected " << p);
        CHECK(std::abs(hits[static_cast<int>(i)] / double(n) - p) < 5 * sd);
    }
}

TEST_CASE("the same seed gives the same tokens", "[unit][sampler]") {
    std::vector<float> logits(100);
    for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(static_cast<float>(i));
    auto draw = [&](uint64_t seed) {
        auto p = plain(1.0f);
        p.seed = seed;
        Sampler s(p);
        std::vector<int32_t> out;
        for (int i = 0; i < 50; ++i) out.push_back(s.sample(logits));
        return out;
    };
    CHECK(draw(7) == draw(7));
    CHECK(draw(7) != draw(8));
}

TEST_CASE("top-k, top-p and min-p cut the candidates as documented", "[unit][sampler]") {
    // probabilities 0.5, 0.25, 0.125, 0.125 (logits are their logs)
    auto make = [] {
        return std::vector<Candidate>{{0, std::log(0.125f)}, {1, std::log(0.5f)}, {2, std::log(0.25f)}, {3, std::log(0.125f)}};
    };
    auto ids = [](const std::vector<Candidate>& c) {
        std::vector<int32_t> v;
        for (auto& x : c) v.push_back(x.id);
        return v;
    };
    auto c = make();
    sampling::sort_and_top_k(c, 2);
    CHECK(ids(c) == std::vector<int32_t>{1, 2});

    c = make();
    sampling::sort_and_top_k(c, 0);
    sampling::top_p(c, 0.7f);  // 0.5 < 0.7 <= 0.75
    CHECK(ids(c) == std::vector<int32_t>{1, 2});

    c = make();
    sampling::sort_and_top_k(c, 0);
    sampling::min_p(c, 0.3f);  // keep p >= 0.15
    CHECK(ids(c) == std::vector<int32_t>{1, 2});
    c = make();
    sampling::sort_and_top_k(c, 0);
    sampling::min_p(c, 0.2f);  // keep p >= 0.1
    CHECK(ids(c).size() == 4);
}

TEST_CASE("penalties lower recently seen tokens", "[unit][sampler]") {
    SamplerParams p = plain(0.0f);
    p.repeat_penalty = 2.0f;
    p.frequency_penalty = 0.5f;
    p.presence_penalty = 0.25f;
    std::vector<Candidate> c{{0, 4.0f}, {1, -1.0f}, {2, 1.0f}};
    std::deque<int32_t> recent{0, 0, 1};
    sampling::apply_penalties(c, recent, p);
    CHECK(c[0].logit == Approx(4.0f / 2 - 2 * 0.5f - 0.25f));
    CHECK(c[1].logit == Approx(-1.0f * 2 - 0.5f - 0.25f));
    CHECK(c[2].logit == Approx(1.0f));

    // Greedy with a strong repeat penalty avoids the token it just produced.
    Sampler s(p);
    const std::vector<float> logits{3.0f, 2.5f};
    CHECK(s.sample(logits) == 0);
    s.accept(0);
    CHECK(s.sample(logits) == 1);
}

TEST_CASE("sampling parameters no chain can use are refused, each by name", "[unit][sampler]") {
    CHECK_NOTHROW(check_sampler_params(SamplerParams{}));
    // Values past a parameter's useful range mean "off" (llama.cpp's meanings) and pass.
    SamplerParams off = plain(-1.0f);
    off.top_k = -3, off.top_p = 2.0f, off.min_p = -1.0f;
    CHECK_NOTHROW(check_sampler_params(off));
    const float nan = std::nanf(""), inf = INFINITY;
    const std::pair<float SamplerParams::*, const char*> fields[] = {
        {&SamplerParams::temperature, "temperature"},         {&SamplerParams::top_p, "top-p"},
        {&SamplerParams::min_p, "min-p"},                     {&SamplerParams::repeat_penalty, "repeat penalty"},
        {&SamplerParams::presence_penalty, "presence penalty"}, {&SamplerParams::frequency_penalty, "frequency penalty"}};
    for (const auto& [field, name] : fields)
        for (const float bad : {nan, inf, -inf}) {
            SamplerParams p;
            p.*field = bad;
            CHECK_THROWS_WITH(check_sampler_params(p), Catch::Contains(name) && Catch::Contains("not a finite number"));
        }
    for (const float bad : {0.0f, -1.0f}) {
        SamplerParams p;
        p.repeat_penalty = bad;
        CHECK_THROWS_WITH(check_sampler_params(p), Catch::Contains("repeat penalty") && Catch::Contains("not above 0"));
    }
    SamplerParams window;
    window.penalty_last_n = -1;
    CHECK_THROWS_WITH(check_sampler_params(window), Catch::Contains("window"));
}
