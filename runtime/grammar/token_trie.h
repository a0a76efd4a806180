#pragma once
// The vocabulary as a trie of the tokens' bytes, built once per model, so that the tokens a
// grammar allows next are found in one walk: the walk feeds each edge's byte to the grammar
// state of its parent and drops the whole subtree at the first byte the grammar refuses, so a
// prefix shared by thousands of tokens is checked once.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "models/tokenizer.h"
#include "runtime/grammar/grammar_matcher.h"

namespace strata::runtime {

class TokenTrie {
public:
    explicit TokenTrie(const models::Tokenizer& tok);

    int32_t n_vocab() const { return static_cast<int32_t>(pieces_.size()); }
    const std::string& piece(int32_t id) const { return pieces_[id]; }
    bool is_eog(int32_t id) const { return eog_[id] != 0; }

    // allowed[t] = 1 for every token whose bytes the matcher's grammar accepts next, and for the
    // end-of-generation tokens when the text so far is complete; 0 for the others.
    void allowed_tokens(const GrammarMatcher& m, std::vector<uint8_t>& allowed) const;

private:
    struct Node {
        uint32_t first_edge = 0, n_edges = 0;    // into edge_byte_ / edge_child_
        uint32_t first_token = 0, n_tokens = 0;  // tokens ending here, into sorted_
    };
    uint32_t build(uint32_t lo, uint32_t hi, size_t depth);
    void walk(uint32_t node, size_t depth, const GrammarMatcher& m, std::vector<GrammarMatcher::State>& states,
              std::vector<uint8_t>& allowed) const;

    std::vector<std::string> pieces_;
    std::vector<uint8_t> eog_;
    std::vector<int32_t> sorted_;  // token ids with text (not end-of-generation) by their bytes
    std::vector<Node> nodes_;      // nodes_[0] is the root
    std::vector<uint8_t> edge_byte_;
    std::vector<uint32_t> edge_child_;
    size_t max_len_ = 0;
};

}  // namespace strata::runtime
