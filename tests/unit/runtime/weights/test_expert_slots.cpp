// The expert cache's policies: frequency-weighted eviction against LRU on skewed routing,
// saved counts keeping the hot experts, slots in use never given away.
#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "runtime/weights/expert_slots.h"

using namespace strata;
using namespace strata::runtime;

namespace {

// Hits of a cache of `slots` over `tokens` tokens, each choosing `k` distinct experts per layer
// with Zipf-like probabilities (expert e's weight 1 / (e + 1)), the same draws for either policy.
int hits_on_skewed_routing(ExpertPolicy policy, int n_layer, int n_expert, int k, int slots, int tokens) {
    ExpertSlots cache(n_layer, n_expert, slots, policy);
    std::mt19937 rng(7);
    std::vector<double> w(n_expert);
    for (int e = 0; e < n_expert; ++e) w[e] = 1.0 / (e + 1);
    int hits = 0;
    for (int t = 0; t < tokens; ++t)
        for (int il = 0; il < n_layer; ++il) {
            std::vector<double> left = w;
            for (int c = 0; c < k; ++c) {
                std::discrete_distribution<int> pick(left.begin(), left.end());
                const int e = pick(rng);
                left[e] = 0;
                cache.touch(il, e);
                int s = cache.find(il, e);
                if (s >= 0) {
                    ++hits;
                    cache.pin(s);
                } else {
                    s = cache.assign(il, e);
                    REQUIRE(s >= 0);
                }
            }
            cache.unpin_all();
        }
    return hits;
}

}  // namespace

TEST_CASE("expert slots: frequency-weighted eviction beats LRU on skewed routing", "[unit][experts]") {
    const int lru = hits_on_skewed_routing(ExpertPolicy::Lru, 4, 32, 4, 48, 400);
    const int freq = hits_on_skewed_routing(ExpertPolicy::Frequency, 4, 32, 4, 48, 400);
    INFO("hits of 6400 choices: LRU " << lru << ", frequency " << freq);
    CHECK(freq > lru);
}

TEST_CASE("expert slots: saved counts keep the hot experts; slots in use are never given away", "[unit][experts]") {
    ExpertSlots cache(1, 4, 2, ExpertPolicy::Frequency);
    cache.seed({{100, 1, 50, 1}});
    const int a = cache.assign(0, 0), b = cache.assign(0, 2);
    REQUIRE((a >= 0 && b >= 0 && a != b));
    CHECK(cache.assign(0, 1) == -1);  // both pinned
    cache.unpin_all();
    // Expert 1 (seeded 1) takes expert 2's slot (50), not expert 0's (100).
    CHECK(cache.assign(0, 1) == b);
    CHECK(cache.find(0, 2) == -1);
    CHECK(cache.find(0, 0) == a);
    cache.drop(a);
    CHECK(cache.find(0, 0) == -1);
    CHECK_THROWS_WITH(parse_expert_policy("lfu"), Catch::Contains("unknown expert cache policy 'lfu'"));
}

