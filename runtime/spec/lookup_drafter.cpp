#include "runtime/spec/lookup_drafter.h"

#include <algorithm>
#include <cmath>
#include <queue>

#include "core/error.h"

namespace strata::runtime {

namespace {
// Matches whose continuations a tree merges: enough that a one-token n-gram's usual
// continuation outweighs its latest one.
constexpr size_t kTreeMatches = 64;
// A match one token longer counts as this many one shorter: the longer the shared n-gram, the
// likelier its continuation is the one being copied.
constexpr double kLongerMatchWeight = 4;

// The continuations' trie: each node a token after its parent, weighed by the matches through it.
struct Continuations {
    struct Node {
        int32_t token;
        double weight = 0;
        size_t first;  // the earliest-ranked match through it (ties: the latest match first)
        std::vector<int32_t> children;
    };
    std::vector<Node> nodes{Node{-1, 0, 0, {}}};  // the root: the sequence's last token

    void add(std::span<const int32_t> tokens, double weight, size_t rank) {
        int32_t at = 0;
        for (const int32_t token : tokens) {
            const auto& kids = nodes[size_t(at)].children;
            const auto it = std::find_if(kids.begin(), kids.end(), [&](int32_t c) { return nodes[size_t(c)].token == token; });
            int32_t next;
            if (it != kids.end()) {
                next = *it;
            } else {
                next = static_cast<int32_t>(nodes.size());
                nodes[size_t(at)].children.push_back(next);
                nodes.push_back(Node{token, 0, rank, {}});
            }
            nodes[size_t(next)].weight += weight;
            at = next;
        }
    }
    // Whether node a is trusted before node b.
    bool before(int32_t a, int32_t b) const {
        const Node &x = nodes[size_t(a)], &y = nodes[size_t(b)];
        return x.weight != y.weight ? x.weight > y.weight : x.first < y.first;
    }
};
}  // namespace

LookupDrafter::LookupDrafter(int32_t max_ngram, int32_t min_ngram) : max_ngram_(max_ngram), min_ngram_(min_ngram) {
    STRATA_ASSERT(min_ngram_ >= 1 && max_ngram_ >= min_ngram_);
}

std::vector<LookupDrafter::Match> LookupDrafter::matches(std::span<const int32_t> context, size_t most) const {
    std::vector<Match> found;
    const auto n = static_cast<int64_t>(context.size());
    auto seen = [&](int64_t from) { return std::any_of(found.begin(), found.end(), [&](const Match& m) { return m.from == from; }); };
    for (int64_t g = std::min<int64_t>(max_ngram_, n - 1); g >= min_ngram_ && found.size() < most; --g) {
        const auto tail = context.subspan(size_t(n - g));
        for (int64_t at = n - g - 1; at >= 0 && found.size() < most; --at)
            if (std::equal(tail.begin(), tail.end(), context.begin() + at) && !seen(at + g))
                found.push_back(Match{at + g, static_cast<int32_t>(g)});
    }
    return found;
}

void LookupDrafter::draft(std::span<const int32_t> context, int32_t max, std::vector<int32_t>& out) {
    DraftTree chain;
    draft_tree(context, max, max, 1, chain);
    out = chain.tokens;
}

void LookupDrafter::draft_tree(std::span<const int32_t> context, int32_t depth, int32_t nodes, int32_t width, DraftTree& out) {
    out.clear();
    if (depth <= 0 || nodes <= 0 || width <= 0) return;
    Continuations trie;
    const auto found = matches(context, kTreeMatches);
    for (size_t rank = 0; rank < found.size(); ++rank) {
        const auto [from, ngram] = found[rank];
        const int64_t end = std::min<int64_t>(int64_t(context.size()), from + depth);
        trie.add(context.subspan(size_t(from), size_t(end - from)), std::pow(kLongerMatchWeight, ngram - 1), rank);
    }
    // The most trusted nodes first, each parent's `width` most trusted children: a parent is
    // placed before its children and siblings in the order they are trusted.
    auto later = [&](const std::pair<int32_t, int32_t>& a, const std::pair<int32_t, int32_t>& b) { return trie.before(b.first, a.first); };
    std::priority_queue<std::pair<int32_t, int32_t>, std::vector<std::pair<int32_t, int32_t>>, decltype(later)> next(later);  // trie node, its parent's index in out
    auto offer_children = [&](int32_t node, int32_t placed_at) {
        auto kids = trie.nodes[size_t(node)].children;
        std::sort(kids.begin(), kids.end(), [&](int32_t a, int32_t b) { return trie.before(a, b); });
        for (size_t i = 0; i < kids.size() && i < size_t(width); ++i) next.emplace(kids[i], placed_at);
    };
    offer_children(0, -1);
    while (!next.empty() && static_cast<int32_t>(out.size()) < nodes) {
        const auto [node, parent] = next.top();
        next.pop();
        out.add(trie.nodes[size_t(node)].token, parent);
        offer_children(node, static_cast<int32_t>(out.size()) - 1);
    }
}

}  // namespace strata::runtime
