#include "runtime/spec/lookup_drafter.h"

#include <algorithm>

#include "core/error.h"

namespace strata::runtime {

LookupDrafter::LookupDrafter(int32_t max_ngram, int32_t min_ngram) : max_ngram_(max_ngram), min_ngram_(min_ngram) {
    STRATA_ASSERT(min_ngram_ >= 1 && max_ngram_ >= min_ngram_);
}

std::vector<int64_t> LookupDrafter::matches(std::span<const int32_t> context, size_t most) const {
    std::vector<int64_t> from;
    const auto n = static_cast<int64_t>(context.size());
    for (int64_t g = std::min<int64_t>(max_ngram_, n - 1); g >= min_ngram_ && from.size() < most; --g) {
        const auto tail = context.subspan(size_t(n - g));
        // The latest earlier occurrence first: the text most like what comes next.
        for (int64_t at = n - g - 1; at >= 0 && from.size() < most; --at)
            if (std::equal(tail.begin(), tail.end(), context.begin() + at) && std::find(from.begin(), from.end(), at + g) == from.end())
                from.push_back(at + g);
    }
    return from;
}

void LookupDrafter::draft(std::span<const int32_t> context, int32_t max, std::vector<int32_t>& out) {
    out.clear();
    if (max <= 0) return;
    const auto from = matches(context, 1);
    if (from.empty()) return;
    const int64_t take = std::min<int64_t>(max, int64_t(context.size()) - from[0]);
    out.assign(context.begin() + from[0], context.begin() + from[0] + take);
}

void LookupDrafter::draft_tree(std::span<const int32_t> context, int32_t depth, int32_t nodes, int32_t width, DraftTree& out) {
    out.clear();
    if (depth <= 0 || nodes <= 0) return;
    std::vector<int32_t> children;  // per node: how many it has
    auto child = [&](int32_t parent, int32_t token) {
        for (size_t i = 0; i < out.size(); ++i)
            if (out.parent[i] == parent && out.tokens[i] == token) return static_cast<int32_t>(i);
        return int32_t{-1};
    };
    int32_t root_children = 0;
    for (const int64_t at : matches(context, size_t(std::max(width, 1)) * 2)) {
        // Its continuation, merged into the tree where it agrees with an earlier match's.
        int32_t node = -1;
        const int64_t end = std::min<int64_t>(int64_t(context.size()), at + depth);
        for (int64_t i = at; i < end; ++i) {
            const int32_t next = child(node, context[size_t(i)]);
            if (next >= 0) {
                node = next;
                continue;
            }
            int32_t& count = node < 0 ? root_children : children[size_t(node)];
            if (count >= width || static_cast<int32_t>(out.size()) >= nodes) break;
            ++count;
            out.add(context[size_t(i)], node);
            children.push_back(0);
            node = static_cast<int32_t>(out.size()) - 1;
        }
    }
}

}  // namespace strata::runtime
