#include "storage/uring_reader.h"

#include <liburing.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <thread>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "storage/chunked_reader.h"

namespace strata::storage {

namespace {

// Registered buffer table size, and the kernel's limit on one registered buffer.
constexpr unsigned kFixedSlots = 64;
constexpr size_t kMaxFixedBytes = size_t{1} << 30;

class UringReader final : public ChunkedReader {
public:
    UringReader(const File& file, const ReaderOptions& options)
        : ChunkedReader(file, options, std::max(1u, options.queue_depth)) {
        // One spare entry for the NOP that stops the reaper.
        const unsigned entries = std::max(1u, options.queue_depth) + 1;
        const int rc = io_uring_queue_init(entries, &ring_, 0);
        if (rc < 0)
            throw IoError(fmt::format("io_uring_queue_init({}) failed: {} (errno {})", entries, std::strerror(-rc), -rc),
                          "the kernel or a sandbox (seccomp, io_uring_disabled) may block io_uring");
        // Waiting with a timeout takes no submission entry from kernel 5.11 (IORING_FEAT_EXT_ARG).
        ticks_ = (ring_.features & IORING_FEAT_EXT_ARG) != 0;
        if (!ticks_) STRATA_LOG_DEBUG("storage: io_uring without IORING_FEAT_EXT_ARG: stalled reads are not looked for");
        // A registered file saves a file-table lookup per read; optional.
        const int fd = file_.fd();
        fixed_file_ = io_uring_register_files(&ring_, &fd, 1) == 0;
        // A sparse table lets regions come and go while reads are in flight (kernel >= 5.19).
        fixed_buffers_ = io_uring_register_buffers_sparse(&ring_, kFixedSlots) == 0;
        for (unsigned i = kFixedSlots; i-- > 0;) free_fixed_.push_back(i);
        STRATA_LOG_DEBUG("storage: io_uring reader for '{}': depth {}, chunk {}, {}, registered file {}, "
                         "registered buffers {}",
                         file_.path().string(), options.queue_depth, format_bytes(chunk_bytes_),
                         file_.direct() ? "O_DIRECT" : "buffered", fixed_file_, fixed_buffers_);
        reaper_ = std::thread([this] { reap_loop(); });
    }

    ~UringReader() override {
        drain();
        // Abandoned reads the kernel still holds may write into staging: give them a moment to
        // come back (cancelled) before the ring and the staging go.
        for (int i = 0; i < 200 && n_abandoned() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        {
            std::lock_guard lk(mu_);
            io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
            STRATA_ASSERT(sqe != nullptr);
            io_uring_prep_nop(sqe);
            io_uring_sqe_set_data(sqe, nullptr);  // the stop signal: chunks are never null
            submit_all_locked();
        }
        reaper_.join();
        io_uring_queue_exit(&ring_);
    }

    std::string_view backend() const override { return "io_uring"; }
    bool redoes_stalled_reads() const override { return ticks_; }

    bool register_region(void* base, size_t bytes) override {
        std::lock_guard lk(mu_);
        return register_locked(static_cast<std::byte*>(base), bytes);
    }

    void unregister_region(void* base) override {
        std::lock_guard lk(mu_);
        unregister_locked(base);
    }

private:
    struct Fixed {
        std::byte* base;
        size_t bytes;
        unsigned index;
        void* region;  // what register_region was given, to unregister all its pieces
    };

    void unregister_locked(void* base) {
        for (auto it = fixed_.begin(); it != fixed_.end();) {
            if (it->region != base) {
                ++it;
                continue;
            }
            iovec empty{nullptr, 0};
            __u64 tag = 0;
            (void)io_uring_register_buffers_update_tag(&ring_, it->index, &empty, &tag, 1);
            free_fixed_.push_back(it->index);
            it = fixed_.erase(it);
        }
    }

    bool register_locked(std::byte* base, size_t bytes) {
        if (!fixed_buffers_ || bytes == 0) return false;
        const size_t n_pieces = (bytes + kMaxFixedBytes - 1) / kMaxFixedBytes;
        if (n_pieces > free_fixed_.size()) return false;
        for (size_t off = 0; off < bytes; off += kMaxFixedBytes) {
            iovec iov{base + off, std::min(kMaxFixedBytes, bytes - off)};
            __u64 tag = 0;
            const unsigned idx = free_fixed_.back();
            const int rc = io_uring_register_buffers_update_tag(&ring_, idx, &iov, &tag, 1);
            if (rc < 0) {
                STRATA_LOG_DEBUG("storage: io_uring buffer registration of {} failed: {}", format_bytes(iov.iov_len),
                                 std::strerror(-rc));
                unregister_locked(base);
                return false;
            }
            free_fixed_.pop_back();
            fixed_.push_back({base + off, iov.iov_len, idx, base});
        }
        return true;
    }

    // The registered buffer holding [p, p + n) entirely, or -1.
    int fixed_index_for(const std::byte* p, size_t n) const {
        for (const Fixed& f : fixed_)
            if (p >= f.base && p + n <= f.base + f.bytes) return static_cast<int>(f.index);
        return -1;
    }

    void staging_allocated_locked(std::byte* base, size_t bytes) override { (void)register_locked(base, bytes); }

    // A read given up on is cancelled, so that one merely slow cannot write late (one the kernel
    // lost is not found, which is harmless); its cancel's own completion carries kCancelTag.
    void abandon_locked(Chunk* chunk) override {
        if (io_uring_sq_space_left(&ring_) == 0) submit_all_locked();
        io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
        if (!sqe) return;
        io_uring_prep_cancel(sqe, chunk, 0);
        io_uring_sqe_set_data(sqe, &kCancelTag);
        submit_all_locked();
    }

    void dispatch_locked() override {
        unsigned queued = 0;
        while (ChunkPtr c = next_chunk_locked()) {
            io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
            STRATA_ASSERT(sqe != nullptr);  // in flight <= queue depth < ring entries
            const int fd = fixed_file_ ? 0 : file_.fd();
            const unsigned len = static_cast<unsigned>(c->length);
            const int idx = fixed_index_for(c->buf, c->length);
            if (idx >= 0) {
                io_uring_prep_read_fixed(sqe, fd, c->buf, len, c->file_offset, idx);
                ++fixed_reads_;
            } else {
                io_uring_prep_read(sqe, fd, c->buf, len, c->file_offset);
            }
            if (fixed_file_) sqe->flags |= IOSQE_FIXED_FILE;
            io_uring_sqe_set_data(sqe, c.release());  // owned by the ring until its CQE
            ++queued;
        }
        if (queued) submit_all_locked();
    }

    void submit_all_locked() {
        // io_uring_enter can refuse for a moment (EAGAIN/EBUSY) or take only part of the
        // queue; the rest stays in the SQ, so keep going until it is empty.
        for (int tries = 0; io_uring_sq_ready(&ring_) > 0; ++tries) {
            const int rc = io_uring_submit(&ring_);
            if (rc >= 0) continue;
            if ((rc == -EINTR || rc == -EAGAIN || rc == -EBUSY) && tries < 10000) {
                std::this_thread::sleep_for(std::chrono::microseconds(50));
                continue;
            }
            STRATA_LOG_ERROR("storage: io_uring_submit failed: {}", std::strerror(-rc));
            STRATA_ASSERT(!"io_uring_submit failed");
        }
    }

    void reap_loop() {
        std::vector<std::pair<void*, int>> batch;
        // Woken each second to look for reads the kernel has not completed for too long, where
        // it can wait with a timeout without taking a submission entry (kernel 5.11 and later).
        const bool ticks = ticks_;
        auto last_look = std::chrono::steady_clock::now();
        const auto look_for_stalls = [&] {
            last_look = std::chrono::steady_clock::now();
            if (const size_t n = redo_stalled())
                STRATA_LOG_WARN("storage: {} io_uring read(s) of '{}' not completed by the kernel in time; read again "
                                "with pread (STRATA_IO=pread reads every file so)",
                                n, file_.path().string());
        };
        for (;;) {
            io_uring_cqe* cqe = nullptr;
            __kernel_timespec tick{1, 0};
            const int rc = ticks ? io_uring_wait_cqe_timeout(&ring_, &cqe, &tick) : io_uring_wait_cqe(&ring_, &cqe);
            if (rc == -ETIME && ticks) {
                look_for_stalls();
                continue;
            }
            if (rc == -EINTR || rc == -EAGAIN || rc == -ETIME) continue;
            if (rc < 0) {
                STRATA_LOG_ERROR("storage: io_uring_wait_cqe failed: {}", std::strerror(-rc));
                STRATA_ASSERT(!"io_uring_wait_cqe failed");
            }
            // Take every completion that is ready in one go, then handle them unlocked.
            batch.clear();
            unsigned head = 0, n = 0;
            io_uring_for_each_cqe(&ring_, head, cqe) {
                batch.emplace_back(io_uring_cqe_get_data(cqe), cqe->res);
                ++n;
            }
            io_uring_cq_advance(&ring_, n);
            // The ring already orders the submitter's writes to each Chunk before its CQE;
            // passing through the lock they were written under makes that visible to
            // race checkers too (TSan cannot see through the kernel).
            { std::lock_guard lk(mu_); }
            bool stop = false;
            for (auto [data, res] : batch) {
                auto* chunk = static_cast<Chunk*>(data);
                if (data == nullptr) stop = true;
                else if (data == &kCancelTag) continue;
                else if (abandoned(chunk)) continue;  // read again already: this late answer is dropped
                else if (ticks && fault_loses(*chunk)) continue;  // as if never posted: redo_stalled takes it over
                else complete(ChunkPtr(chunk), res);
            }
            if (stop) return;
            // (A read can stall while others complete.)
            if (ticks && std::chrono::steady_clock::now() - last_look > std::chrono::seconds(1)) look_for_stalls();
        }
    }

public:
    ReaderStats stats() const override {
        ReaderStats s = ChunkedReader::stats();
        std::lock_guard lk(mu_);
        s.n_fixed = fixed_reads_;
        return s;
    }

private:
    static inline char kCancelTag = 0;  // user_data of cancel requests
    io_uring ring_{};
    bool ticks_ = false;  // the reaper can wait with a timeout: stalled reads are looked for
    bool fixed_file_ = false;
    bool fixed_buffers_ = false;
    std::vector<Fixed> fixed_;
    std::vector<unsigned> free_fixed_;
    uint64_t fixed_reads_ = 0;
    std::thread reaper_;
};

}  // namespace

std::unique_ptr<Reader> make_uring_reader(const File& file, const ReaderOptions& options) {
    return std::make_unique<UringReader>(file, options);
}

}  // namespace strata::storage
