#include "runtime/exec/draft_rows.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"

namespace strata::runtime {

namespace {
std::vector<int64_t> depths(std::span<const int32_t> parent) {
    std::vector<int64_t> d(parent.size());
    for (size_t i = 1; i < parent.size(); ++i) d[i] = d[size_t(parent[i])] + 1;
    return d;
}
}  // namespace

std::vector<int64_t> draft_slots(std::span<const int32_t> parent) {
    if (parent.empty() || parent[0] != -1)
        throw UsageError("a draft tree's first node must be its root (parent -1)", "give the sequence's last token first");
    for (size_t i = 1; i < parent.size(); ++i)
        if (parent[i] < 0 || size_t(parent[i]) >= i)
            throw UsageError(fmt::format("draft node {} names parent {}", i, parent[i]), "list every node after its parent");
    // Depth first, each node's children in their order: a node's slot is its place in that walk.
    std::vector<std::vector<int32_t>> children(parent.size());
    for (size_t i = 1; i < parent.size(); ++i) children[size_t(parent[i])].push_back(int32_t(i));
    std::vector<int64_t> slot(parent.size());
    std::vector<int32_t> todo{0};
    for (int64_t next = 0; !todo.empty(); ++next) {
        const int32_t node = todo.back();
        todo.pop_back();
        slot[size_t(node)] = next;
        todo.insert(todo.end(), children[size_t(node)].rbegin(), children[size_t(node)].rend());  // the first on top
    }
    return slot;
}

bool draft_is_chain(std::span<const int32_t> parent) {
    for (size_t i = 0; i < parent.size(); ++i)
        if (parent[i] != int32_t(i) - 1) return false;
    return true;
}

std::vector<int32_t> first_child_path(std::span<const int32_t> parent, int32_t n, int32_t from, int64_t most) {
    std::vector<int32_t> path;
    for (int32_t node = from; node >= 0 && node < n && int64_t(path.size()) < most;) {
        path.push_back(node);
        int32_t child = -1;
        for (int32_t r = node + 1; r < n && child < 0; ++r)
            if (parent.empty() ? r == node + 1 : parent[size_t(r)] == node) child = r;
        node = child;
    }
    return path;
}

int64_t draft_span(std::span<const int32_t> parent) {
    const auto slot = draft_slots(parent);
    return *std::max_element(slot.begin(), slot.end()) + 1;
}

DraftRows lay_out_draft(std::span<const int32_t> parent, int64_t base) {
    DraftRows d;
    d.base = base;
    const auto offset = draft_slots(parent);
    const auto depth = depths(parent);
    const size_t n = parent.size();
    d.span = *std::max_element(offset.begin(), offset.end()) + 1;
    d.words = static_cast<int32_t>((d.span + 63) / 64);
    d.slot.resize(n);
    d.pos.resize(n);
    d.key_pos.assign(size_t(d.span), -1);
    d.mask.assign(n * size_t(d.words), 0);
    for (size_t i = 0; i < n; ++i) {
        d.slot[i] = base + offset[i];
        d.pos[i] = base + depth[i];
        d.key_pos[size_t(offset[i])] = d.pos[i];
        // Its ancestors' bits and its own: its parent's row and one more.
        uint64_t* row = &d.mask[i * size_t(d.words)];
        if (i > 0) std::copy_n(&d.mask[size_t(parent[i]) * size_t(d.words)], d.words, row);
        row[offset[i] / 64] |= uint64_t{1} << (offset[i] % 64);
    }
    return d;
}

}  // namespace strata::runtime
