#pragma once
// What the io_uring and pread backends share: tickets, splitting requests into chunk reads
// (read_plan), staging buffers for unaligned requests, reissuing short reads, turning
// failures into IoError messages, fault injection and stats. A backend only issues reads
// (dispatch_locked) and reports their results (complete).
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "storage/budget.h"
#include "storage/read_plan.h"
#include "storage/reader.h"

namespace strata::storage {

class ChunkedReader : public Reader {
public:
    const File& file() const override { return file_; }
    Ticket submit(const ReadRequest& request) override;
    bool poll(Ticket ticket) override;
    void wait(Ticket ticket) override;
    void wait_all() override;
    ReaderStats stats() const override;
    void set_trace(Trace* trace) override;

protected:
    // Reads the backend can have in flight at once: the queue depth or the worker count.
    ChunkedReader(const File& file, const ReaderOptions& options, unsigned max_inflight);

    // One device read and what to do with its bytes. Fields advance as short reads are reissued.
    struct Chunk {
        Ticket ticket = 0;
        uint64_t file_offset = 0;  // next byte to read
        size_t length = 0;         // bytes left to read
        size_t need = 0;           // bytes left that must arrive (the rest is past EOF)
        std::byte* buf = nullptr;  // where the next byte goes: the caller's buffer or staging
        bool bounce = false;       // read into staging, then copy `copy_len` bytes ...
        size_t skip = 0;           // ... starting `skip` bytes into the staging slot ...
        size_t copy_len = 0;
        const std::byte* copy_from = nullptr;  // staging slot + skip
        std::byte* copy_to = nullptr;  // ... to here
        int staging = -1;          // staging slot, held until the chunk finishes
        uint64_t seq = 0;          // issue number of the read in flight (fault injection)
    };
    using ChunkPtr = std::unique_ptr<Chunk>;

    // Under mu_: the next pending chunk, now counted in flight; nullptr when none is
    // pending, the in-flight limit is reached, no staging slot is free, or we are closing.
    ChunkPtr next_chunk_locked();
    // Without mu_: a read of `chunk` returned `result` (bytes, or -errno). Copies staged
    // bytes, reissues short reads, records failures, then dispatches more work.
    void complete(ChunkPtr chunk, long result);
    // Under mu_: issue pending chunks (take them with next_chunk_locked).
    virtual void dispatch_locked() = 0;
    // Under mu_: the staging arena was just allocated (io_uring registers it).
    virtual void staging_allocated_locked(std::byte* base, size_t bytes) {}
    // First thing in a backend's destructor: drops pending reads, waits for reads in flight.
    void drain();
    // Without mu_: the reads in flight for `stall_after` or longer, read again (whole) with pread
    // here and completed; the backend may still hold the first attempts, which are kept (with
    // their staging slots) until it gives them back (abandoned). Staged chunks that wait for a
    // slot while abandoned reads hold slots are read so too. Returns how many were read.
    size_t redo_stalled();
    // Without mu_: whether a completion's chunk is one redo_stalled took over; the chunk is
    // then released, and the completion is to be dropped.
    bool abandoned(Chunk* chunk);
    // First attempts still held by the backend (abandoned, not given back).
    size_t n_abandoned() const;
    // Under mu_: redo_stalled gave up on `chunk`'s first attempt (io_uring cancels it).
    virtual void abandon_locked(Chunk* chunk) {}
    // Whether the completion of `chunk` is to be dropped as lost (fault injection).
    bool fault_loses(const Chunk& chunk) { return fault_.loses(chunk.seq); }

    File file_;
    mutable std::mutex mu_;
    const size_t chunk_bytes_;

private:
    struct TicketState {
        ReadRequest request;
        size_t chunks_left = 0;
        std::string error;  // first failure, empty on success
        std::string hint;
        std::chrono::steady_clock::time_point submitted;  // for the trace
    };

    void ensure_staging_locked();
    void finish_locked(Chunk& chunk, const std::string& error, const std::string& hint);
    void cancel_pending_locked(Ticket ticket);
    void note_inflight_locked(int delta);
    [[noreturn]] void throw_failure(TicketState& state);

    // A stalled chunk's bytes by pread (short reads resumed): the bytes read, or -errno.
    long pread_chunk(const Chunk& chunk, std::byte* buf) const;

    const FileGeometry geo_;
    const std::chrono::milliseconds stall_after_;
    const unsigned max_inflight_;
    const unsigned n_staging_;
    MemoryBudget* staging_budget_;
    FaultInjector fault_;
    const std::string what_;  // names the trace's track

    std::condition_variable done_cv_;
    std::map<Ticket, TicketState> tickets_;
    std::deque<ChunkPtr> pending_;
    std::map<const Chunk*, std::chrono::steady_clock::time_point> issued_;  // in flight, since
    std::vector<ChunkPtr> abandoned_;  // first attempts of chunks read again, until given back
    Ticket next_ticket_ = 1;
    unsigned inflight_ = 0;
    uint64_t n_issued_ = 0;
    bool closing_ = false;

    AlignedBuffer staging_;
    Reservation staging_reservation_;
    std::vector<int> free_staging_;

    ReaderStats stats_;
    std::chrono::steady_clock::time_point busy_since_;
    Trace* trace_ = nullptr;  // under mu_
    int trace_track_ = 0;
};

}  // namespace strata::storage
