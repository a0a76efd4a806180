// The expert cache's policies: frequency-weighted eviction against LRU on skewed routing and on
// routing with locality, the adaptive policy following the better of the two on each, saved
// counts keeping the hot experts, slots in use never given away.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <vector>

#include "runtime/weights/expert_slots.h"

using namespace strata;
using namespace strata::runtime;

namespace {

// Plays `tokens` tokens through a cache of `slots`: each token, for each layer, `choose(il)`
// gives the chosen experts (distinct). Returns the hits.
template <class Choose>
int hits_of(ExpertPolicy policy, int n_layer, int n_expert, int slots, int tokens, Choose choose) {
    ExpertSlots cache(n_layer, n_expert, slots, policy);
    int hits = 0;
    for (int t = 0; t < tokens; ++t)
        for (int il = 0; il < n_layer; ++il) {
            for (int e : choose(il)) {
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

// k distinct experts per layer with Zipf-like probabilities (expert e's weight 1 / (e + 1)),
// the same draws for every policy: a few hot experts, no locality.
int hits_on_skewed_routing(ExpertPolicy policy, int n_layer, int n_expert, int k, int slots, int tokens) {
    std::mt19937 rng(7);
    std::vector<double> w(n_expert);
    for (int e = 0; e < n_expert; ++e) w[e] = 1.0 / (e + 1);
    return hits_of(policy, n_layer, n_expert, slots, tokens, [&](int) {
        std::vector<double> left = w;
        std::vector<int> chosen;
        for (int c = 0; c < k; ++c) {
            std::discrete_distribution<int> pick(left.begin(), left.end());
            chosen.push_back(pick(rng));
            left[chosen.back()] = 0;
        }
        return chosen;
    });
}

// k distinct experts per layer drawn uniformly from a window of 3k neighbours that moves on by
// one expert every other token: every expert as often as any other over the run, but what a
// token chooses is near what the last ones chose (the locality of hidden states from token to
// token).
int hits_on_drifting_routing(ExpertPolicy policy, int n_layer, int n_expert, int k, int slots, int tokens) {
    std::mt19937 rng(11);
    int calls = 0;
    return hits_of(policy, n_layer, n_expert, slots, tokens, [&](int) {
        const int start = calls++ / (2 * n_layer);
        std::vector<int> window(3 * k);
        for (int i = 0; i < 3 * k; ++i) window[i] = (start + i) % n_expert;
        std::shuffle(window.begin(), window.end(), rng);
        return std::vector<int>(window.begin(), window.begin() + k);
    });
}

}  // namespace

// The better rule wins clearly, and adaptive (whose shadows need a few cache turns to tell
// the rules apart) beats the worse one and comes within 5% of the better.
static void check_adaptive_follows(int (*hits)(ExpertPolicy, int, int, int, int, int), ExpertPolicy better, ExpertPolicy worse) {
    const int b = hits(better, 4, 32, 4, 48, 400), w = hits(worse, 4, 32, 4, 48, 400);
    const int adaptive = hits(ExpertPolicy::Adaptive, 4, 32, 4, 48, 400);
    INFO("hits of 6400 choices: " << expert_policy_name(better) << " " << b << ", " << expert_policy_name(worse) << " "
                                  << w << ", adaptive " << adaptive);
    CHECK(b > w);
    CHECK(adaptive > w);
    CHECK(adaptive >= 0.95 * b);
}

TEST_CASE("expert slots: frequency-weighted eviction beats LRU on skewed routing; adaptive follows it", "[unit][experts]") {
    check_adaptive_follows(hits_on_skewed_routing, ExpertPolicy::Frequency, ExpertPolicy::Lru);
}

TEST_CASE("expert slots: LRU beats frequency-weighted eviction on drifting routing; adaptive follows it", "[unit][experts]") {
    check_adaptive_follows(hits_on_drifting_routing, ExpertPolicy::Lru, ExpertPolicy::Frequency);
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
    for (ExpertPolicy p : {ExpertPolicy::Adaptive, ExpertPolicy::Frequency, ExpertPolicy::Lru})
        CHECK(parse_expert_policy(expert_policy_name(p)) == p);
}

