#pragma once
// The paged key/value cache shared by every sequence (vLLM's PagedAttention layout): a pool
// of blocks of kBlockSize positions, the same block id in every layer; per layer and block,
// kBlockSize rows of n_embd_kv keys, and as many values, in the cache's element type (F32,
// F16, BF16 or Q8_0: cpu/attention_cpu.h converts rows into it and reads them as they are).
// Each sequence has a block table (its positions in order) and its token ids; full blocks are
// published in the prefix cache (runtime/kv/kv_blocks.h), so a later sequence that starts with
// the same tokens attaches them instead of computing them again. Shared blocks are never
// written: a sequence that must change one (truncate into it) gives it up and recomputes
// those positions.
// Layers whose KV does not fit the DRAM budget live in a spill file (KvSpill) and are brought
// back through a ring of pinned buffers, prefetched ahead of the layer that needs them.
// Rebuilt layers (KVPR/HCache: the plan's "recompute" KV) keep each position's attention input
// (the normed hidden state, n_embd_hidden values) instead of its keys and values; the backend
// recomputes K and V from them into one slot that all rebuilt layers share (runtime/exec/cpu/kv_rebuild.h).
// That pays where n_embd_hidden < 2 n_embd_kv (multi-head attention): less memory per position.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "core/kernel_shapes.h"
#include "runtime/kv/kv_blocks.h"
#include "runtime/kv/kv_spill.h"
#include "runtime/kv/prefix_spill.h"
#include "storage/pinned_pool.h"

namespace strata::storage { class MemoryBudget; }

namespace strata { class Trace; }

namespace strata::runtime {

using SeqId = int32_t;

class KvCache {
public:
    static constexpr int32_t kBlockSize = kKvBlockSize;  // positions per block: the attention kernels' key tile

    // A pool of n_blocks (0: enough for one sequence of n_ctx positions); n_ctx bounds each
    // sequence. It starts with no sequence (create_seq).
    // Throws UsageError for a type that is not a KV type, or Q8_0 with n_embd_kv not a
    // multiple of its 32-value blocks.
    KvCache(int32_t n_layer, int32_t n_ctx, int32_t n_embd_kv, int32_t n_blocks = 0, DType type = DType::F32);
    KvCache(int32_t n_layer, int32_t n_ctx, int32_t n_embd_kv, const KvSpillOptions& spill, int32_t n_blocks = 0,
            DType type = DType::F32);
    ~KvCache();
    KvCache(const KvCache&) = delete;
    KvCache& operator=(const KvCache&) = delete;

    int32_t n_ctx() const { return n_ctx_; }
    int32_t n_layer() const { return n_layer_; }
    DType type() const { return type_; }
    // Bytes of one position's keys (or values): row_bytes(type, n_embd_kv).
    int64_t row_bytes() const { return row_bytes_; }
    // Bytes from one block to the next in `layer`: kBlockSize rows, padded to 64 bytes in DRAM
    // and, in spilled layers, to the O_DIRECT alignment so that their blocks are read and
    // written in place.
    int64_t block_stride(int32_t layer) const { return layer < n_resident_ ? resident_block_bytes_ : spill_block_bytes_; }
    // The first K (V) row of `block` in `layer`: valid for resident layers, and for a spilled
    // layer between begin_layer and end_layer. Keys only (MLA): v is k.
    std::byte* k(int32_t layer, int32_t block);
    std::byte* v(int32_t layer, int32_t block);
    // Writes one position's new keys and values (n_embd_kv floats each), converted to the
    // cache's type, as row `row` of `block` in `layer` (begun, when spilled).
    void store(int32_t layer, int32_t block, int32_t row, const float* k, const float* v);

    // Rebuilt layers: k() and v() address the shared slot, which holds the layer last rebuilt;
    // its saved rows are these, in the cache's type.
    bool rebuilt(int32_t layer) const { return hidden_slot_[layer] >= 0; }
    int32_t n_rebuilt() const { return n_rebuilt_; }
    int32_t n_embd_hidden() const { return n_embd_hidden_; }
    int64_t hidden_row_bytes() const { return hidden_row_bytes_; }
    std::byte* hidden(int32_t layer, int32_t block);
    void store_hidden(int32_t layer, int32_t block, int32_t row, const float* x);

    // Brings a spilled layer's KV into memory (waits for its read) and makes the row moves kept
    // paths left for it; no-op when resident. Every reader and writer of a spilled layer's
    // blocks comes through here (no prefix spill is kept beside spilled layers).
    void begin_layer(int32_t layer);
    // Writes `blocks` (ascending, distinct: those the pass wrote) of a spilled layer back.
    void end_layer(int32_t layer, std::span<const int32_t> blocks);

    // Sequences.
    SeqId create_seq();
    void free_seq(SeqId seq);  // its blocks go back to the pool (full ones stay cached)
    int32_t seq_len(SeqId seq) const;
    std::span<const int32_t> block_table(SeqId seq) const;
    std::span<const int32_t> seq_tokens(SeqId seq) const;
    // For an empty sequence: attaches the cached blocks that hold a prefix of `tokens`, full
    // blocks only and never all of `tokens` (the last one must be evaluated for its logits).
    // Returns the positions attached.
    int32_t attach_prefix(SeqId seq, std::span<const int32_t> tokens);
    // A block of the sequence's that it shared, and the copy it holds instead (unshare).
    struct BlockCopy {
        int32_t from, to;
    };
    // Gives the sequence a copy of its own, in every layer, of each block another sequence
    // also holds (attached from the prefix cache while another had it), so that it reads and
    // writes only its own blocks: a batch at one depth from one prefill (`strata bench -d`).
    // Copies are not published (the originals stay cached). Every layer must be in DRAM (none
    // spilled). Stops at the first block the pool cannot copy, and the sequence keeps only
    // the positions before it (the caller computes the rest). Returns the copies made, in
    // order, for a backend that holds KV of its own (Backend::copy_blocks).
    std::vector<BlockCopy> unshare(SeqId seq);
    // Blocks the sequence still needs so that it holds `n_total` positions.
    int32_t blocks_needed(SeqId seq, int32_t n_total) const;
    // Allocates the blocks for n more positions; false when the pool has too few free blocks
    // (an expected outcome: the blocks already taken stay in the sequence).
    bool reserve(SeqId seq, int32_t n);
    // Records `tokens` as the sequence's next positions (their KV written by a pass) and
    // publishes the blocks they fill.
    void commit(SeqId seq, std::span<const int32_t> tokens);
    // After a pass that verified a draft tree (runtime/exec/draft_rows.h): the keys and values at
    // slots seq_len + slots[i] become those of positions seq_len + i (slots ascending, each at
    // or after its position), `tokens` are committed and the blocks past them given back.
    // Resident layers move the rows at once, spilled ones when they are next begun (KvSpill::
    // move_rows: no extra read). Every layer must keep its keys and values (none rebuilt: their
    // shared slot holds one layer's rows for one pass only).
    void keep_path(SeqId seq, std::span<const int64_t> slots, std::span<const int32_t> tokens);
    // Forgets positions >= n. Returns the positions kept: n, or fewer when position n falls in
    // a block another sequence shares (the caller recomputes positions [kept, n) then).
    int32_t truncate_seq(SeqId seq, int32_t n);

    const KvBlockPool& pool() const { return pool_; }
    // Prefix-cache blocks kept on disk after their eviction from DRAM (0 without a prefix spill),
    // and how many came back since the start.
    int32_t n_prefix_spilled() const;
    int64_t n_prefix_restored() const { return n_prefix_restored_; }

    uint64_t bytes() const;  // DRAM held by resident layers
    // The part of bytes() that `layers` (true: counted) take: each resident one's K/V rows or
    // saved hidden states, and the pair the rebuilt ones share once one of them is counted.
    uint64_t layers_bytes(const std::vector<bool>& layers) const;
    // The same for a cache of `pair` bytes of K/V a layer and `hidden` of saved rows a rebuilt
    // one, every layer resident: what a layout counts before the cache is made.
    static uint64_t layers_bytes(const std::vector<bool>& layers, const std::vector<bool>& rebuilt, uint64_t pair,
                                 uint64_t hidden);
    // Page-locks the resident layers' K and V through `pinner` (cudaHostRegister) for the cache's
    // life, so that a device attending to them copies their blocks asynchronously at its link's
    // rate (from pageable memory the driver stages every copy). Every page becomes resident.
    // Returns the bytes registered; a refusal is warned about and leaves the cache pageable.
    uint64_t pin_resident(std::shared_ptr<storage::HostPinner> pinner);
    uint64_t spill_buffer_bytes() const;  // DRAM of the spill ring (charged to its budget)
    int32_t n_spilled() const;
    // Whether `layer`'s keys and values live in the spill file (read through its ring), not DRAM.
    bool spilled(int32_t layer) const { return layer >= n_resident_; }
    void set_trace(Trace* trace);

    // Blocks for a sequence of n positions.
    static int32_t blocks_for(int64_t n) { return static_cast<int32_t>((n + kBlockSize - 1) / kBlockSize); }
    // DRAM (or spill file) bytes one layer's KV of `type` takes at most with n_blocks blocks
    // (a spilled layer's blocks are padded for O_DIRECT; a resident layer may take less).
    static uint64_t layer_bytes(int32_t n_blocks, int32_t n_embd_kv, DType type, bool keys_only);
    // A layer's keys and values held in DRAM (bytes() per resident layer): blocks aligned to cache lines.
    static uint64_t resident_layer_bytes(int32_t n_blocks, int32_t n_embd_kv, DType type, bool keys_only);
    // DRAM bytes of a rebuilt layer's saved rows.
    static uint64_t hidden_layer_bytes(int32_t n_blocks, int32_t n_embd_hidden, DType type);

private:
    // Bytes of each of the K and V arrays of the resident layers.
    size_t kv_array_bytes() const { return size_t(resident_block_bytes_) * size_t(pool_.n_blocks()) * size_t(n_kv_slots_); }
    struct Seq {
        bool live = false;
        std::vector<int32_t> blocks;
        std::vector<int32_t> tokens;   // one per position
        std::vector<uint64_t> hashes;  // key hash of each published (full) block
    };
    Seq& seq(SeqId id);
    const Seq& seq(SeqId id) const;
    int32_t allocate_block();
    void release_block(int32_t block);
    // A block's bytes in every layer (K and V, or a rebuilt layer's saved rows), in one order.
    std::vector<std::span<std::byte>> block_parts(int32_t block);
    // Those bytes to or from the prefix spill's staging.
    void copy_block(int32_t block, bool to_staging);
    // A block holding the KV of `key` read back from the prefix spill, or -1.
    int32_t restore_block(const BlockKey& key);
    // The prefix spill's file; a disk that cannot hold it leaves none, with a warning.
    void open_prefix_spill(const KvSpillOptions& spill);

    int32_t n_layer_;
    int32_t n_ctx_;
    int32_t n_embd_kv_;
    DType type_;
    int32_t n_resident_;
    int64_t row_bytes_;
    int64_t resident_block_bytes_;
    int64_t spill_block_bytes_;
    int32_t n_embd_hidden_ = 0;
    int64_t hidden_row_bytes_ = 0;
    int64_t hidden_block_bytes_ = 0;
    int32_t n_rebuilt_ = 0;
    std::vector<int32_t> kv_slot_;      // per resident layer: its K/V slot (rebuilt layers share the last)
    std::vector<int32_t> hidden_slot_;  // per layer: its slot of saved rows, -1 when it keeps K/V
    int32_t n_kv_slots_ = 0;
    KvBlockPool pool_;
    std::vector<Seq> seqs_;
    // Left uninitialised so that untouched blocks cost no resident memory.
    bool keys_only_ = false;  // KvSpillOptions::keys_only
    std::unique_ptr<std::byte[]> k_, v_, h_;
    std::vector<storage::PinnedRange> pinned_;  // k_ and v_ registered (pin_resident): released before them
    std::unique_ptr<KvSpill> spill_;
    std::unique_ptr<PrefixSpill> prefix_spill_;
    int64_t n_prefix_restored_ = 0;
};

}  // namespace strata::runtime
