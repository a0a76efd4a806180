#pragma once
// The KV cache of the layers that do not fit DRAM, in a spill file on disk. Each layer has a
// K region and a V region (MLA's layers a K region alone) laid out like the block pool (block b at b * block_bytes, each
// block padded for O_DIRECT); a layer's blocks that hold data are read back into a ring slot
// of the same layout ahead of its turn, and the blocks a pass changed are written back when
// the layer is done: copied out and written in the background (runtime/kv/staged_writer.h),
// so the slot goes back to the ring and the next layer runs without waiting for the disk; a
// layer's next read is issued once its own writes have landed. The file is unlinked as soon as it is open, so it disappears when the
// process ends, however it ends.
// Rows moved between passes (a draft tree's kept path: KvCache::keep_path) are not read in for
// that: each layer keeps its moves and makes them when it is next begun, in the buffer its read
// filled, before anything reads or writes it; the blocks they change are written back with the
// pass's own at its end. Until then a block they read from stays in the layer's next read even
// when it is freed meanwhile.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <utility>
#include <vector>

namespace strata::storage {
class MemoryBudget;
class PinnedPool;
class Reader;
}  // namespace strata::storage

namespace strata { class Trace; }

namespace strata::runtime {

class ScratchFile;
class StagedWriter;
class StreamRing;

struct KvSpillOptions {
    int32_t n_resident_layers = 0;       // layers [0, n) stay in DRAM, the rest spill
    std::filesystem::path dir;           // where the spill file goes (removed at exit)
    int prefetch_depth = 2;
    storage::MemoryBudget* budget = nullptr;  // the ring's buffers are charged here
    std::vector<bool> rebuilt;                // per layer (or empty: none); only resident layers
    int32_t n_embd_hidden = 0;                // values of a rebuilt layer's saved rows
    // Disk for prefix-cache blocks evicted from DRAM (runtime/kv/prefix_spill.h), in `dir`;
    // 0: none. Only a cache whose layers are all resident keeps them.
    uint64_t prefix_spill_bytes = 0;
    // MLA (deepseek2): a position's one row is its keys and its values both; no layer keeps
    // value rows, in DRAM or in the spill file (KvCache::v is then KvCache::k).
    bool keys_only = false;
};

// One row of KV copied to another place in the same layer (block and row in the block).
struct RowMove {
    int32_t from_block, from_row, to_block, to_row;
};

class KvSpill {
public:
    // Throws IoError naming the directory when the file cannot be made or the disk is full.
    // `block_bytes` is a multiple of the O_DIRECT alignment (KvCache pads blocks to it).
    // `row_bytes`: one position's keys (or values) in a block.
    KvSpill(int32_t n_layers, int32_t n_blocks, uint64_t block_bytes, uint64_t row_bytes, const KvSpillOptions& opts);
    ~KvSpill();

    // Brings `layer` in and makes its pending moves.
    void begin(int32_t layer);
    // Writes `blocks` (ascending, distinct) of the begun layer back to the file, and the blocks
    // its moves changed.
    void end(int32_t layer, std::span<const int32_t> blocks);
    // Every layer's rows move so (in order) at its next begin. A layer that holds no data in a
    // move's source block (it never wrote it: a layer whose KV lives elsewhere) skips that move.
    void move_rows(std::span<const RowMove> moves);
    // Issues the reads whose layers' write-backs have landed since; called between layers.
    void poll();
    std::pair<std::byte*, std::byte*> current(int32_t layer) const;  // K and V of the begun layer (K twice: keys only)
    // The block's content no longer matters (freed or evicted): it is not read back again, from
    // a layer's next begin on where a pending move reads it.
    void forget(int32_t block);
    void set_trace(Trace* trace);
    uint64_t buffer_bytes() const;  // the ring's and the write staging's

    // Staging for the writes of up to this many blocks (K and V) a layer at once: a decode step
    // of as many sequences.
    static constexpr int32_t kStagedBlocks = 64;

    static uint64_t layer_bytes(int32_t n_blocks, uint64_t block_bytes, bool keys_only) {
        return (keys_only ? 1 : 2) * uint64_t(n_blocks) * block_bytes;
    }

private:
    void write_run(int32_t layer, uint64_t region, uint64_t slot_offset, int32_t b0, int32_t b1);
    // The begun layer's pending moves made in its buffer, their changed blocks into moved_.
    void apply_moves(int32_t layer);

    int32_t n_layers_;
    int32_t n_blocks_;
    uint64_t block_bytes_;
    uint64_t row_bytes_;
    bool keys_only_;
    uint64_t region_bytes_;  // one side (K or V) of one layer
    uint64_t layer_stride_;  // a layer's regions
    std::unique_ptr<ScratchFile> file_;
    // Per layer and block: whether the file holds data for it. Set when a pass writes the
    // block; the read for a layer's next pass is issued after that layer's end, so it sees it.
    std::vector<std::vector<uint8_t>> written_;
    std::unique_ptr<storage::MemoryBudget> own_budget_;  // when the caller gave none
    std::unique_ptr<storage::PinnedPool> pool_;
    std::unique_ptr<storage::Reader> reader_;
    std::unique_ptr<StreamRing> ring_;
    std::unique_ptr<StagedWriter> writer_;
    std::vector<uint64_t> last_write_;  // per layer: the ticket of its latest write
    std::vector<std::vector<RowMove>> moves_;      // per layer: moves to make at its next begin
    std::vector<std::vector<int32_t>> forgotten_;  // per layer: blocks forgotten while a move reads them
    std::vector<int32_t> moved_;                   // blocks the begun layer's moves changed
    int32_t current_layer_ = -1;
    std::byte* current_ = nullptr;
};

}  // namespace strata::runtime
