#include "runtime/kv/kv_spill.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "runtime/kv/scratch_file.h"
#include "runtime/kv/staged_writer.h"
#include "runtime/weights/stream_ring.h"
#include "storage/budget.h"
#include "storage/file_io.h"
#include "storage/pinned_pool.h"
#include "storage/reader.h"

namespace strata::runtime {

namespace {
constexpr uint64_t kAlign = storage::kDefaultDioAlign;
}  // namespace

KvSpill::KvSpill(int32_t n_layers, int32_t n_blocks, uint64_t block_bytes, uint64_t row_bytes, const KvSpillOptions& opts)
    : n_layers_(n_layers),
      n_blocks_(n_blocks),
      block_bytes_(block_bytes),
      row_bytes_(row_bytes),
      keys_only_(opts.keys_only),
      region_bytes_(uint64_t(n_blocks) * block_bytes),
      layer_stride_(layer_bytes(n_blocks, block_bytes, opts.keys_only)),
      written_(n_layers, std::vector<uint8_t>(n_blocks, 0)),
      last_write_(n_layers, 0),
      moves_(n_layers),
      forgotten_(n_layers) {
    STRATA_ASSERT(block_bytes % kAlign == 0);
    const uint64_t total = layer_stride_ * n_layers;
    file_ = std::make_unique<ScratchFile>(opts.dir, "KV spill file", "--kv-spill", total);

    storage::PinnedPoolOptions po;
    po.slot_bytes = layer_stride_;
    po.n_slots = static_cast<size_t>(std::min(n_layers, std::max(1, opts.prefetch_depth + 1)));
    po.what = "KV spill buffers";
    if (!opts.budget) own_budget_ = std::make_unique<storage::MemoryBudget>("DRAM", UINT64_MAX);
    storage::MemoryBudget& budget = opts.budget ? *opts.budget : *own_budget_;
    pool_ = std::make_unique<storage::PinnedPool>(budget, po);
    writer_ = std::make_unique<StagedWriter>(*file_, budget, (keys_only_ ? 1 : 2) * uint64_t(std::min(n_blocks, kStagedBlocks)) * block_bytes,
                                             kAlign);
    storage::ReaderOptions ro;
    ro.what = "KV spill reads";
    reader_ = storage::open_reader(file_->file(), ro);
    reader_->register_region(pool_->data(), pool_->bytes());
    std::vector<int> layers(n_layers);
    for (int i = 0; i < n_layers; ++i) layers[i] = i;
    ring_ = std::make_unique<StreamRing>(
        *reader_, *pool_, layers,
        [this](int layer) {
            // Only the blocks that hold data, in runs of consecutive blocks, K then V.
            std::vector<RingRead> reads;
            const auto& w = written_[layer];
            const uint64_t k = uint64_t(layer) * layer_stride_;
            for (int32_t b0 = 0; b0 < n_blocks_;) {
                if (!w[b0]) {
                    ++b0;
                    continue;
                }
                int32_t b1 = b0 + 1;
                while (b1 < n_blocks_ && w[b1]) ++b1;
                const uint64_t off = uint64_t(b0) * block_bytes_, len = uint64_t(b1 - b0) * block_bytes_;
                reads.push_back({off, k + off, len});
                if (!keys_only_) reads.push_back({region_bytes_ + off, k + region_bytes_ + off, len});
                b0 = b1;
            }
            return reads;
        },
        "kv",
        // A layer is read once its last write-back is on disk; until then the reads after it wait
        // too, and compute only when it needs the layer (poll() issues them meanwhile).
        [this](int layer, bool block) {
            if (!block) return writer_->done(last_write_[layer]);
            writer_->wait(last_write_[layer]);
            return true;
        });
    STRATA_LOG_INFO("kv: {} layers spill to {} ({}), through {} x {} buffers", n_layers, opts.dir.string(),
                    format_bytes(total), pool_->n_slots(), format_bytes(po.slot_bytes));
}

KvSpill::~KvSpill() {
    writer_.reset();  // its queued writes read the staging, not the ring's buffers
    ring_.reset();
    if (reader_ && pool_) reader_->unregister_region(pool_->data());
}

void KvSpill::begin(int32_t layer) {
    current_ = ring_->acquire(layer);
    current_layer_ = layer;
    apply_moves(layer);
}

void KvSpill::move_rows(std::span<const RowMove> moves) {
    for (int32_t layer = 0; layer < n_layers_; ++layer)
        for (const RowMove& m : moves)
            if (written_[size_t(layer)][size_t(m.from_block)]) moves_[size_t(layer)].push_back(m);
}

void KvSpill::apply_moves(int32_t layer) {
    moved_.clear();
    auto& forgotten = forgotten_[size_t(layer)];
    const auto& w = written_[size_t(layer)];
    for (const RowMove& m : moves_[size_t(layer)]) {
        // A destination whose content no longer matters is left alone (and not written back).
        if (!w[size_t(m.to_block)] || std::find(forgotten.begin(), forgotten.end(), m.to_block) != forgotten.end()) continue;
        auto move = [&](std::byte* region) {
            std::memmove(region + m.to_block * block_bytes_ + m.to_row * row_bytes_,
                         region + m.from_block * block_bytes_ + m.from_row * row_bytes_, row_bytes_);
        };
        move(current_);
        if (!keys_only_) move(current_ + region_bytes_);
        moved_.push_back(m.to_block);
    }
    moves_[size_t(layer)].clear();
    for (const int32_t b : forgotten) written_[size_t(layer)][size_t(b)] = 0;
    forgotten.clear();
}

std::pair<std::byte*, std::byte*> KvSpill::current(int32_t layer) const {
    STRATA_ASSERT(layer == current_layer_);
    return {current_, keys_only_ ? current_ : current_ + region_bytes_};
}

void KvSpill::write_run(int32_t layer, uint64_t region, uint64_t slot_offset, int32_t b0, int32_t b1) {
    const uint64_t off = uint64_t(b0) * block_bytes_, len = uint64_t(b1 - b0) * block_bytes_;
    last_write_[layer] = writer_->write(region + off, {current_ + slot_offset + off, len});
}

void KvSpill::end(int32_t layer, std::span<const int32_t> pass_blocks) {
    STRATA_ASSERT(layer == current_layer_);
    std::vector<int32_t> blocks(pass_blocks.begin(), pass_blocks.end());
    if (!moved_.empty()) {
        blocks.insert(blocks.end(), moved_.begin(), moved_.end());
        std::sort(blocks.begin(), blocks.end());
        blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
        moved_.clear();
    }
    const uint64_t k = uint64_t(layer) * layer_stride_;
    for (size_t i = 0; i < blocks.size();) {  // runs of consecutive blocks, one write each
        size_t j = i + 1;
        while (j < blocks.size() && blocks[j] == blocks[j - 1] + 1) ++j;
        write_run(layer, k, 0, blocks[i], blocks[j - 1] + 1);
        if (!keys_only_) write_run(layer, k + region_bytes_, region_bytes_, blocks[i], blocks[j - 1] + 1);
        for (size_t x = i; x < j; ++x) written_[layer][blocks[x]] = 1;
        i = j;
    }
    current_layer_ = -1;
    ring_->release();
}

void KvSpill::poll() { ring_->poll(); }

void KvSpill::forget(int32_t block) {
    for (int32_t layer = 0; layer < n_layers_; ++layer) {
        const auto& moves = moves_[size_t(layer)];
        const bool read = std::any_of(moves.begin(), moves.end(), [&](const RowMove& m) { return m.from_block == block; });
        if (read) forgotten_[size_t(layer)].push_back(block);  // read in for the move, forgotten after it
        else written_[size_t(layer)][size_t(block)] = 0;
    }
}

void KvSpill::set_trace(Trace* trace) {
    ring_->set_trace(trace);
    reader_->set_trace(trace);
    writer_->set_trace(trace);
}

uint64_t KvSpill::buffer_bytes() const { return pool_->bytes() + writer_->staging_bytes(); }

}  // namespace strata::runtime
