#pragma once
// The merge loop both BPE tokenizers share (tokenizer_bpe.cpp, tokenizer_spm.cpp), as
// llama.cpp's tokenizer sessions run it: the text as a linked list of UTF-8 characters, the
// adjacent pairs that may merge queued by priority, and the best pair (then the leftmost)
// merged until none is left. A queued pair whose side was merged away or grew is stale.
#include <cstdint>
#include <optional>
#include <queue>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "models/unicode.h"

namespace strata::models {

struct MergeSymbol {
    int32_t prev, next;
    uint32_t start, n;  // byte span in the text; n == 0 once merged into its left neighbour
};

// `priority(l, r, symbols)` gives the priority of merging the adjacent symbols l and r (higher
// first), or nullopt when they do not merge. Returns the symbols, merged in place.
template <class Priority>
std::vector<MergeSymbol> merge_pairs(std::string_view text, Priority&& priority) {
    using P = typename std::invoke_result_t<Priority&, int32_t, int32_t, const std::vector<MergeSymbol>&>::value_type;
    struct Pair {
        P priority;
        int32_t left, right;
        uint32_t size;
        bool operator<(const Pair& o) const { return priority < o.priority || (priority == o.priority && left > o.left); }
    };
    std::vector<MergeSymbol> sym;
    for (uint32_t off = 0; off < text.size();) {
        const uint32_t len = std::min<uint32_t>(uint32_t(text.size()) - off, unicode::utf8_len(text[off]));
        const auto i = static_cast<int32_t>(sym.size());
        sym.push_back({i - 1, off + len == text.size() ? -1 : i + 1, off, len});
        off += len;
    }
    std::priority_queue<Pair> queue;
    auto add = [&](int32_t l, int32_t r) {
        if (l < 0 || r < 0) return;
        if (const std::optional<P> p = priority(l, r, std::as_const(sym))) queue.push({*p, l, r, sym[l].n + sym[r].n});
    };
    for (int32_t i = 1; i < static_cast<int32_t>(sym.size()); ++i) add(i - 1, i);
    while (!queue.empty()) {
        const Pair pair = queue.top();
        queue.pop();
        MergeSymbol& l = sym[pair.left];
        MergeSymbol& r = sym[pair.right];
        // Stale: a side was merged away, or grew (spans only grow, so the size tells).
        if (l.n == 0 || r.n == 0 || l.n + r.n != pair.size) continue;
        l.n += r.n;
        r.n = 0;
        l.next = r.next;
        if (r.next >= 0) sym[r.next].prev = pair.left;
        add(l.prev, pair.left);
        add(pair.left, l.next);
    }
    return sym;
}

}  // namespace strata::models
