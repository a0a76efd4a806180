#include "runtime/spec/drafter.h"

namespace strata::runtime {

void DraftTree::assign_chain(std::span<const int32_t> chain) {
    clear();
    for (size_t i = 0; i < chain.size(); ++i) add(chain[i], static_cast<int32_t>(i) - 1);
}

void Drafter::draft_tree(std::span<const int32_t> context, int32_t depth, int32_t /*nodes*/, int32_t /*width*/, DraftTree& out) {
    std::vector<int32_t> chain;
    draft(context, depth, chain);
    out.assign_chain(chain);
}

}  // namespace strata::runtime
