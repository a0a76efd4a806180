#pragma once
// Where a draft tree's nodes go in a verifying pass (speculative decoding: runtime/spec/). A
// node at depth d (the root, the sequence's last token, at 0) stands at position base + d and
// writes its keys and values at slot base + k, k its place in a depth-first walk of the tree
// taking each node's children in order: one slot a node, the likeliest path (each first child)
// at its positions. So a node's ancestors lie at slots in position order, and the CPU's
// attention, which sums a tree's keys in lanes by their positions, gives each node exactly the
// bits the chain of its ancestors gets in plain decoding (cpu/attention_cpu.h, AttentionTree).
// A chain is the tree whose every node is the first child of the one before: its slots are its
// positions.
#include <cstdint>
#include <span>
#include <vector>

namespace strata::runtime {

struct DraftRows {
    int64_t base = 0;                 // the sequence's length before the pass
    std::vector<int64_t> slot, pos;   // per node
    std::vector<int64_t> key_pos;     // per slot from base: the position of the node there (-1: none)
    std::vector<uint64_t> mask;       // per node, `words` words: bit i set where it sees slot base + i
    int32_t words = 0;
    int64_t span = 0;  // slots from base the pass writes
};

// Slots from the root's each node of the tree takes, one each (node i's parent is parent[i]; -1
// for the root, node 0). Throws UsageError unless parent[0] == -1 and 0 <= parent[i] < i.
std::vector<int64_t> draft_slots(std::span<const int32_t> parent);
// Whether every node is the child of the one before (a chain: laid out as plain positions).
bool draft_is_chain(std::span<const int32_t> parent);
// Node `from` and below it each node's first child (its likeliest guess), at most `most` nodes:
// the rows a verification is likeliest to read. An empty `parent` is a chain of `n` nodes.
std::vector<int32_t> first_child_path(std::span<const int32_t> parent, int32_t n, int32_t from, int64_t most);
// KV slots the tree's pass writes from the sequence's length on.
int64_t draft_span(std::span<const int32_t> parent);
DraftRows lay_out_draft(std::span<const int32_t> parent, int64_t base);

}  // namespace strata::runtime
