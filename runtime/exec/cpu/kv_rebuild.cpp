#include "runtime/exec/cpu/kv_rebuild.h"

#include <algorithm>

namespace strata::runtime {

void rows_to_rebuild(const KvCache& kv, std::span<const PassLayout::Segment> segments, std::vector<RebuildRow>& out) {
    out.clear();
    std::vector<bool> seen(kv.pool().n_blocks(), false);
    for (const auto& s : segments) {
        const auto table = kv.block_table(s.seq);
        for (int64_t b = 0; b * KvCache::kBlockSize < s.pos0; ++b) {
            if (seen[table[b]]) continue;
            seen[table[b]] = true;
            const int64_t end = std::min<int64_t>(s.pos0, (b + 1) * KvCache::kBlockSize);
            for (int64_t pos = b * KvCache::kBlockSize; pos < end; ++pos)
                out.push_back({table[b], static_cast<int32_t>(pos % KvCache::kBlockSize), pos});
        }
    }
}

}  // namespace strata::runtime
