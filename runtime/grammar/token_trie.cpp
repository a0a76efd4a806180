#include "runtime/grammar/token_trie.h"

#include <algorithm>

namespace strata::runtime {

TokenTrie::TokenTrie(const models::Tokenizer& tok) {
    const int32_t n = tok.n_vocab();
    pieces_.resize(n);
    eog_.assign(n, 0);
    for (int32_t id = 0; id < n; ++id) {
        pieces_[id] = tok.piece(id);
        eog_[id] = tok.is_eog(id) ? 1 : 0;
        if (!eog_[id] && !pieces_[id].empty()) {
            sorted_.push_back(id);
            max_len_ = std::max(max_len_, pieces_[id].size());
        }
    }
    std::sort(sorted_.begin(), sorted_.end(), [&](int32_t a, int32_t b) { return pieces_[a] < pieces_[b]; });
    build(0, static_cast<uint32_t>(sorted_.size()), 0);
}

// The node for sorted_[lo, hi), whose pieces share their first `depth` bytes. Shorter pieces
// sort first, so the ones ending here lead the range.
uint32_t TokenTrie::build(uint32_t lo, uint32_t hi, size_t depth) {
    const auto index = static_cast<uint32_t>(nodes_.size());
    nodes_.emplace_back();
    uint32_t i = lo;
    while (i < hi && pieces_[sorted_[i]].size() == depth) ++i;
    nodes_[index].first_token = lo;
    nodes_[index].n_tokens = i - lo;
    // One child per next byte; their edges sit together so the walk reads them in order.
    std::vector<std::pair<uint32_t, uint32_t>> groups;
    while (i < hi) {
        const auto byte = static_cast<uint8_t>(pieces_[sorted_[i]][depth]);
        uint32_t j = i;
        while (j < hi && static_cast<uint8_t>(pieces_[sorted_[j]][depth]) == byte) ++j;
        groups.emplace_back(i, j);
        i = j;
    }
    const auto first_edge = static_cast<uint32_t>(edge_byte_.size());
    nodes_[index].first_edge = first_edge;
    nodes_[index].n_edges = static_cast<uint32_t>(groups.size());
    edge_byte_.resize(first_edge + groups.size());
    edge_child_.resize(first_edge + groups.size());
    for (size_t g = 0; g < groups.size(); ++g) {
        edge_byte_[first_edge + g] = static_cast<uint8_t>(pieces_[sorted_[groups[g].first]][depth]);
        edge_child_[first_edge + g] = build(groups[g].first, groups[g].second, depth + 1);
    }
    return index;
}

void TokenTrie::walk(uint32_t node, size_t depth, const GrammarMatcher& m, std::vector<GrammarMatcher::State>& states,
                     std::vector<uint8_t>& allowed) const {
    const Node& nd = nodes_[node];
    for (uint32_t e = nd.first_edge; e < nd.first_edge + nd.n_edges; ++e) {
        if (!m.step(states[depth], edge_byte_[e], states[depth + 1])) continue;
        const Node& child = nodes_[edge_child_[e]];
        for (uint32_t t = child.first_token; t < child.first_token + child.n_tokens; ++t) allowed[sorted_[t]] = 1;
        walk(edge_child_[e], depth + 1, m, states, allowed);
    }
}

void TokenTrie::allowed_tokens(const GrammarMatcher& m, std::vector<uint8_t>& allowed) const {
    allowed.assign(pieces_.size(), 0);
    std::vector<GrammarMatcher::State> states(max_len_ + 1);
    states[0] = m.state();
    walk(0, 0, m, states, allowed);
    if (m.complete())
        for (size_t id = 0; id < eog_.size(); ++id)
            if (eog_[id]) allowed[id] = 1;
}

}  // namespace strata::runtime
