#include "storage/read_plan.h"

#include <algorithm>

#include "core/error.h"
#include "storage/file_io.h"

namespace strata::storage {

namespace {

// A read of the aligned block(s) [start, start + len) keeping wanted bytes [w0, w1).
PlannedRead bounced(uint64_t start, uint64_t len, uint64_t w0, uint64_t w1, uint64_t req_offset) {
    PlannedRead r;
    r.file_offset = start;
    r.length = len;
    r.skip = w0 - start;
    r.copy_len = w1 - w0;
    r.need = r.skip + r.copy_len;
    r.dst_offset = w0 - req_offset;
    r.bounce = true;
    return r;
}

PlannedRead straight(uint64_t start, uint64_t len, uint64_t req_offset) {
    PlannedRead r;
    r.file_offset = start;
    r.length = len;
    r.need = len;
    r.copy_len = len;
    r.dst_offset = start - req_offset;
    return r;
}

}  // namespace

std::vector<PlannedRead> plan_reads(const void* dst, uint64_t offset, size_t length, const FileGeometry& geo,
                                    size_t chunk_bytes) {
    std::vector<PlannedRead> out;
    if (length == 0) return out;
    const uint64_t end = offset + length;
    const uint64_t C = chunk_bytes;
    if (!geo.direct) {
        for (uint64_t s = offset; s < end; s += C) out.push_back(straight(s, std::min(C, end - s), offset));
        return out;
    }
    const uint64_t A = geo.offset_align;
    STRATA_ASSERT(C % A == 0 && C % geo.memory_align == 0);
    const uint64_t mid_start = align_up(offset, A);
    const uint64_t mid_end = align_down(end, A);
    const auto* base = static_cast<const std::byte*>(dst);
    const bool congruent = mid_start < mid_end && is_aligned(base + (mid_start - offset), geo.memory_align);
    if (congruent) {
        // Partial blocks at the ends go through staging; whole blocks go straight in.
        if (offset < mid_start) out.push_back(bounced(mid_start - A, A, offset, mid_start, offset));
        for (uint64_t s = mid_start; s < mid_end; s += C)
            out.push_back(straight(s, std::min(C, mid_end - s), offset));
        if (mid_end < end) out.push_back(bounced(mid_end, A, mid_end, end, offset));
    } else {
        // Chunks on the aligned grid from the first block; each superset is <= C.
        const uint64_t a0 = align_down(offset, A);
        const uint64_t a1 = align_up(end, A);
        for (uint64_t s = a0; s < a1; s += C) {
            const uint64_t e = std::min(s + C, a1);
            out.push_back(bounced(s, e - s, std::max(s, offset), std::min(e, end), offset));
        }
    }
    return out;
}

}  // namespace strata::storage
