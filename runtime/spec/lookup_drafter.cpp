#include "runtime/spec/lookup_drafter.h"

#include <algorithm>

#include "core/error.h"

namespace strata::runtime {

LookupDrafter::LookupDrafter(int32_t max_ngram, int32_t min_ngram) : max_ngram_(max_ngram), min_ngram_(min_ngram) {
    STRATA_ASSERT(min_ngram_ >= 1 && max_ngram_ >= min_ngram_);
}

void LookupDrafter::draft(std::span<const int32_t> context, int32_t max, std::vector<int32_t>& out) {
    out.clear();
    const auto n = static_cast<int64_t>(context.size());
    for (int64_t g = std::min<int64_t>(max_ngram_, n - 1); g >= min_ngram_ && max > 0; --g) {
        const auto tail = context.subspan(size_t(n - g));
        // The latest earlier occurrence: the text most like what comes next.
        for (int64_t at = n - g - 1; at >= 0; --at) {
            if (!std::equal(tail.begin(), tail.end(), context.begin() + at)) continue;
            const int64_t from = at + g, take = std::min<int64_t>(max, n - from);
            out.assign(context.begin() + from, context.begin() + from + take);
            return;
        }
    }
}

}  // namespace strata::runtime
