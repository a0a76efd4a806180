#pragma once
// Writes to a scratch file in the background: each write's bytes are copied into a staging area
// and a thread writes them out in order, so the caller's buffer is free at once and its thread
// does not wait for the disk (a spilled KV layer's write-back would otherwise queue behind the
// reads in flight before the next layer could run). The staging area is charged to a memory
// budget; a write larger than it, or any write when the budget cannot give it, is written at
// once instead, after the queued ones.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <span>
#include <thread>

#include "storage/budget.h"
#include "storage/file_io.h"

namespace strata { class Trace; }

namespace strata::runtime {

class ScratchFile;

class StagedWriter {
public:
    // `capacity` bytes of staging (0: every write synchronous), a multiple of `align`, reserved
    // in `budget` when it fits there (else none).
    StagedWriter(const ScratchFile& file, storage::MemoryBudget& budget, uint64_t capacity, uint64_t align);
    ~StagedWriter();  // writes what is queued
    StagedWriter(const StagedWriter&) = delete;
    StagedWriter& operator=(const StagedWriter&) = delete;

    // Copies `src` (its size a multiple of the alignment) and queues its write at `offset`;
    // waits for earlier writes when the staging is full. Returns a ticket for wait(). Throws
    // the IoError of an earlier failed write.
    uint64_t write(uint64_t offset, std::span<const std::byte> src);
    // Blocks until the write of `ticket` and every earlier one are on disk; throws the first failure.
    void wait(uint64_t ticket);
    // Whether wait(ticket) would return at once (a failure included); never blocks.
    bool done(uint64_t ticket);
    uint64_t staging_bytes() const { return capacity_; }
    // Records each write, from its queueing to its landing on disk, as a slice on the
    // "disk: KV spill writes" track of `trace` (null: none).
    void set_trace(Trace* trace);

private:
    struct Job {
        uint64_t offset;      // in the file
        uint64_t at, length;  // in the staging area
        uint64_t charged;     // length plus the end of the area skipped to keep it contiguous
        std::chrono::steady_clock::time_point queued;  // for the trace
    };
    void run();
    void rethrow_failure();  // holding mutex_

    const ScratchFile& file_;
    storage::Reservation reservation_;
    uint64_t capacity_ = 0;
    storage::AlignedBuffer staging_;
    std::mutex mutex_;
    std::condition_variable changed_;
    std::deque<Job> queue_;
    uint64_t head_ = 0, used_ = 0;  // the next free byte of the ring, bytes in flight
    uint64_t queued_ = 0, done_ = 0;
    bool stopping_ = false;
    std::exception_ptr error_;
    Trace* trace_ = nullptr;  // guarded by mutex_
    int trace_track_ = 0;
    std::thread worker_;  // last: starts once the rest exists
};

}  // namespace strata::runtime
