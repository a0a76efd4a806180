// What the device interface builds from its own ops, the same on every device.
#include "gpu/device.h"

#include "core/error.h"
#include "gpu/event_capture.h"

namespace strata::gpu {

namespace {
std::byte* row_at(const KvRows& r, int64_t i) {
    return static_cast<std::byte*>(r.cache) + r.block[i] * r.block_stride + r.row[i] * r.row_stride;
}
// Whether a and b read the same input: x, its transform and shape.
bool same_input(const MatmulArgs& a, const MatmulArgs& b) {
    return a.x == b.x && a.n_tok == b.n_tok && a.n_cols == b.n_cols && a.norm_w == b.norm_w && a.norm_eps == b.norm_eps &&
           a.swiglu_up == b.swiglu_up;
}
// Whether row i + 1 of r follows row i in the same block.
bool next_row(const KvRows& r, int64_t i) { return r.block[i + 1] == r.block[i] && r.row[i + 1] == r.row[i] + 1; }
}  // namespace

void refuse_event_in_capture(bool capturing) {
    if (capturing)
        throw BackendError("an event was recorded or waited on inside a captured graph",
                           "an internal error (a captured step uses one stream); please report it");
}

size_t launch_products(std::span<const MatmulArgs> parts) {
    if (parts.empty() || parts[0].n_tok > Device::kRowWiseRows) return parts.empty() ? 0 : 1;
    size_t n = 1;
    while (n < parts.size() && n < Device::kMaxLaunchProducts && parts[n].type == parts[0].type) ++n;
    return n;
}

void Device::matmul_group(std::span<const MatmulArgs> parts, Stream& s) {
    for (const MatmulArgs& p : parts)
        if (!same_input(p, parts[0]))
            throw BackendError("a group of matmuls whose inputs differ",
                               "an internal error (matmul_group of different inputs); please report it");
    for (size_t i = 0; i < parts.size();) {
        const size_t n = launch_products(parts.subspan(i));
        products(parts.subspan(i, n), i > 0, s);
        i += n;
    }
}

void Device::kv_move(const KvRows& from, const KvRows& to, Stream& s) {
    const size_t bytes = row_bytes(from.type, from.n);
    for (int64_t i = 0; i < from.n_tok;) {
        std::byte* src = row_at(from, i);
        std::byte* dst = row_at(to, i);
        // A run of rows next to each other on both sides, its source and destination apart.
        int64_t end = i + 1;
        while (end < from.n_tok && next_row(from, end - 1) && next_row(to, end - 1)) ++end;
        const int64_t span = (end - i - 1) * from.row_stride + int64_t(bytes);
        if (src + span <= dst || dst + span <= src) {
            copy_d2d(dst, src, size_t(span), s);
        } else {
            for (int64_t k = i; k < end; ++k) copy_d2d(row_at(to, k), row_at(from, k), bytes, s);
        }
        i = end;
    }
}

}  // namespace strata::gpu
