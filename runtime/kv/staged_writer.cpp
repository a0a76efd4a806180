#include "runtime/kv/staged_writer.h"

#include <cstring>
#include <utility>

#include "core/bytes.h"
#include "core/error.h"
#include "core/trace.h"
#include "runtime/kv/scratch_file.h"

namespace strata::runtime {

StagedWriter::StagedWriter(const ScratchFile& file, storage::MemoryBudget& budget, uint64_t capacity, uint64_t align)
    : file_(file) {
    STRATA_ASSERT(align > 0 && capacity % align == 0);
    if (capacity > 0 && budget.available() >= capacity) {
        reservation_ = storage::Reservation(budget, capacity, "KV spill write staging");
        staging_ = storage::allocate_aligned(capacity, align);
        capacity_ = capacity;
    }
    worker_ = std::thread([this] { run(); });
}

StagedWriter::~StagedWriter() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    changed_.notify_all();
    worker_.join();
}

void StagedWriter::rethrow_failure() {
    if (error_) std::rethrow_exception(error_);
}

uint64_t StagedWriter::write(uint64_t offset, std::span<const std::byte> src) {
    const uint64_t len = src.size();
    std::unique_lock lock(mutex_);
    rethrow_failure();
    if (len > capacity_) {
        // Larger than the staging area: after the queued writes, straight from the caller's buffer.
        const uint64_t before = queued_;
        changed_.wait(lock, [&] { return done_ >= before || error_; });
        rethrow_failure();
        Trace* trace = trace_;
        const int track = trace_track_;
        lock.unlock();
        const auto t0 = std::chrono::steady_clock::now();
        file_.write(offset, src);
        if (trace) trace->slice(track, format_bytes(len), t0, std::chrono::steady_clock::now());
        return before;
    }
    // The staging area is a ring whose bytes free in the order they were queued; a write that
    // would wrap starts at the beginning instead, the skipped end charged to it.
    uint64_t at = 0, charged = 0;
    changed_.wait(lock, [&] {
        if (error_) return true;
        if (used_ == 0) head_ = 0;
        at = head_ + len <= capacity_ ? head_ : 0;
        charged = len + (at == 0 && head_ > 0 ? capacity_ - head_ : 0);
        return used_ + charged <= capacity_;
    });
    rethrow_failure();
    std::memcpy(staging_.get() + at, src.data(), len);
    head_ = at + len;
    used_ += charged;
    queue_.push_back({offset, at, len, charged, trace_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{}});
    const uint64_t ticket = ++queued_;
    lock.unlock();
    changed_.notify_all();
    return ticket;
}

void StagedWriter::wait(uint64_t ticket) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return done_ >= ticket || error_; });
    rethrow_failure();
}

bool StagedWriter::done(uint64_t ticket) {
    std::lock_guard lock(mutex_);
    return done_ >= ticket || error_;
}

void StagedWriter::set_trace(Trace* trace) {
    const int track = trace ? trace->track("disk: KV spill writes") : 0;
    std::lock_guard lock(mutex_);
    trace_ = trace;
    trace_track_ = track;
}

void StagedWriter::run() {
    std::unique_lock lock(mutex_);
    for (;;) {
        changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, and everything queued is written
        const Job job = queue_.front();
        queue_.pop_front();
        lock.unlock();
        std::exception_ptr failed;
        try {
            file_.write(job.offset, {staging_.get() + job.at, job.length});
        } catch (...) {
            failed = std::current_exception();
        }
        lock.lock();
        if (trace_) trace_->slice(trace_track_, format_bytes(job.length), job.queued, std::chrono::steady_clock::now());
        if (failed && !error_) error_ = failed;
        used_ -= job.charged;
        ++done_;
        changed_.notify_all();
    }
}

}  // namespace strata::runtime
