#include "runtime/kv_spill.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "runtime/core/error.h"
#include "runtime/core/log.h"
#include "runtime/stream_ring.h"
#include "storage/budget.h"
#include "storage/file_io.h"
#include "storage/pinned_pool.h"
#include "storage/reader.h"

namespace strata {

namespace {
constexpr uint64_t kAlign = storage::kDefaultDioAlign;

uint64_t region_bytes(int32_t n_ctx, int32_t n_embd_kv) {
    return storage::align_up(uint64_t(n_ctx) * n_embd_kv * sizeof(float), kAlign);
}

[[noreturn]] void spill_error(const std::filesystem::path& dir, const std::string& what, int err) {
    throw IoError(fmt::format("KV spill file in '{}': {}: {}", dir.string(), what, std::strerror(err)),
                  err == ENOSPC ? "free disk space there, point --kv-spill at another directory, or use a smaller --ctx"
                                : "point --kv-spill at a writable directory");
}
}  // namespace

uint64_t KvSpill::layer_bytes(int32_t n_ctx, int32_t n_embd_kv) { return 2 * region_bytes(n_ctx, n_embd_kv); }

KvSpill::KvSpill(int32_t n_layers, int32_t n_ctx, int32_t n_embd_kv, const KvSpillOptions& opts)
    : n_layers_(n_layers),
      row_bytes_(uint64_t(n_embd_kv) * sizeof(float)),
      region_bytes_(region_bytes(n_ctx, n_embd_kv)),
      filled_(n_layers, 0) {
    std::error_code ec;
    std::filesystem::create_directories(opts.dir, ec);
    std::string path = (opts.dir / "strata-kv-XXXXXX").string();
    fd_ = ::mkstemp(path.data());
    if (fd_ < 0) spill_error(opts.dir, "cannot create it", errno);
    // O_DIRECT keeps spilled KV out of the page cache (it would count against nobody's
    // budget and hide the disk's speed); filesystems without it (tmpfs) work buffered.
    if (::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_DIRECT) != 0)
        STRATA_LOG_WARN("kv: O_DIRECT refused for the spill file in {}; using buffered I/O", opts.dir.string());
    const uint64_t total = layer_bytes(n_ctx, n_embd_kv) * n_layers;
    if (int err = ::posix_fallocate(fd_, 0, static_cast<off_t>(total)); err != 0) {
        ::close(fd_);
        ::unlink(path.c_str());
        spill_error(opts.dir, fmt::format("cannot reserve {}", storage::format_bytes(total)), err);
    }
    auto file = storage::File::open_read(path, storage::OpenMode::DirectOrBuffered);
    ::unlink(path.c_str());  // gone at exit, also on Ctrl-C or a crash

    storage::PinnedPoolOptions po;
    po.slot_bytes = layer_bytes(n_ctx, n_embd_kv);
    po.n_slots = static_cast<size_t>(std::min(n_layers, std::max(1, opts.prefetch_depth + 1)));
    po.what = "KV spill buffers";
    if (!opts.budget) own_budget_ = std::make_unique<storage::MemoryBudget>("DRAM", UINT64_MAX);
    pool_ = std::make_unique<storage::PinnedPool>(opts.budget ? *opts.budget : *own_budget_, po);
    reader_ = storage::open_reader(file);
    reader_->register_region(pool_->data(), pool_->bytes());
    std::vector<int> layers(n_layers);
    for (int i = 0; i < n_layers; ++i) layers[i] = i;
    ring_ = std::make_unique<StreamRing>(
        *reader_, *pool_, layers,
        [this](int layer) {
            // Only the positions written so far: oldest first, K then V.
            const uint64_t len = storage::align_up(uint64_t(filled_[layer]) * row_bytes_, kAlign);
            const uint64_t k = uint64_t(layer) * 2 * region_bytes_;
            return std::vector<RingRead>{{0, k, len}, {region_bytes_, k + region_bytes_, len}};
        },
        "kv");
    STRATA_LOG_INFO("kv: {} layers spill to {} ({}), through {} x {} buffers", n_layers, opts.dir.string(),
                    storage::format_bytes(total), pool_->n_slots(), storage::format_bytes(po.slot_bytes));
}

KvSpill::~KvSpill() {
    ring_.reset();
    if (reader_ && pool_) reader_->unregister_region(pool_->data());
    if (fd_ >= 0) ::close(fd_);
}

void KvSpill::begin(int32_t layer) {
    current_ = ring_->acquire(layer);
    current_layer_ = layer;
}

std::pair<float*, float*> KvSpill::current(int32_t layer) const {
    STRATA_ASSERT(layer == current_layer_);
    return {reinterpret_cast<float*>(current_), reinterpret_cast<float*>(current_ + region_bytes_)};
}

void KvSpill::write_rows(uint64_t region, uint64_t slot_offset, int64_t pos0, int64_t n) {
    // Whole aligned blocks around the new rows: the rows before them in the first block are
    // in the slot already (read back or written this pass).
    const auto a = storage::aligned_superset(uint64_t(pos0) * row_bytes_, uint64_t(n) * row_bytes_, kAlign);
    const std::byte* src = current_ + slot_offset + a.offset;
    for (uint64_t done = 0; done < a.length;) {
        const ssize_t w = ::pwrite(fd_, src + done, a.length - done, static_cast<off_t>(region + a.offset + done));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0)
            throw IoError(fmt::format("writing {} of spilled KV cache at offset {}: {}", storage::format_bytes(a.length),
                                      region + a.offset, w < 0 ? std::strerror(errno) : "no progress"),
                          "check the disk that holds the spill directory (--kv-spill)");
        done += static_cast<uint64_t>(w);
    }
}

void KvSpill::end(int32_t layer, int64_t pos0, int64_t n) {
    STRATA_ASSERT(layer == current_layer_);
    const uint64_t k = uint64_t(layer) * 2 * region_bytes_;
    write_rows(k, 0, pos0, n);
    write_rows(k + region_bytes_, region_bytes_, pos0, n);
    filled_[layer] = std::max<int64_t>(filled_[layer], pos0 + n);
    current_layer_ = -1;
    ring_->release();
}

void KvSpill::truncate(int32_t n_past) {
    for (auto& f : filled_) f = std::min<int64_t>(f, n_past);
}

void KvSpill::set_trace(Trace* trace) { ring_->set_trace(trace); }

uint64_t KvSpill::buffer_bytes() const { return pool_->bytes(); }

}  // namespace strata
