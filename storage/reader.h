#pragma once
// Asynchronous reads of byte ranges of one file into caller buffers. Two backends share
// this interface: io_uring (uring_reader) and a pread thread pool (pread_reader), chosen by
// open_reader(). Everything is thread-safe: one thread may submit while another waits.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "storage/file_io.h"
#include "storage/io_fault.h"

namespace strata { class Trace; }

namespace strata::storage {

class MemoryBudget;

using Ticket = uint64_t;

// Bytes [file_offset, file_offset + length) of the file land at dst[0, length), whatever
// the alignment of either; aligned requests avoid staging copies (see read_plan.h).
struct ReadRequest {
    void* dst = nullptr;
    uint64_t file_offset = 0;
    size_t length = 0;
};

struct ReaderStats {
    uint64_t n_requests = 0;       // completed requests
    uint64_t bytes_requested = 0;  // bytes delivered to callers
    uint64_t n_reads = 0;          // device reads issued, reissues included
    uint64_t bytes_read = 0;       // bytes the device returned (aligned supersets included)
    uint64_t n_short_reads = 0;    // reads that came back short and were reissued
    uint64_t n_bounced = 0;        // reads that went through staging
    uint64_t n_fixed = 0;          // io_uring reads into registered buffers
    uint64_t n_stalled = 0;        // io_uring reads not completed in time, read again with pread
    double busy_seconds = 0;       // wall time with at least one read in flight
    // bytes_read / busy_seconds in GB/s (1e9), 0 before any read.
    double gbps() const { return busy_seconds > 0 ? bytes_read / busy_seconds / 1e9 : 0; }
};

enum class IoBackend {
    Auto,   // io_uring, else the pread pool; STRATA_IO=pread|uring overrides
    Uring,  // io_uring or IoError
    Pread,  // the pread thread pool
};

struct ReaderOptions {
    IoBackend backend = IoBackend::Auto;
    unsigned queue_depth = 32;          // io_uring reads in flight
    size_t chunk_bytes = size_t{1} << 20;  // larger requests are split so the queue stays full
    unsigned pread_threads = 4;         // workers of the pread backend
    unsigned staging_slots = 8;         // chunk-sized bounce buffers for unaligned requests
    MemoryBudget* staging_budget = nullptr;  // where bounce buffers are accounted, if anywhere
    std::optional<FaultSpec> fault;     // unset: STRATA_FAULT_IO
    // An io_uring read with no completion for this long is read again with pread (a kernel that
    // never completes it would otherwise hang the reader); its first attempt is abandoned.
    std::chrono::milliseconds stall_after{30000};
    std::string what = "reads";         // the trace's track: "disk: <backend> <what>"
};

class Reader {
public:
    virtual ~Reader() = default;  // waits for reads in flight: they write into caller memory

    virtual std::string_view backend() const = 0;  // "io_uring" or "pread"
    // Whether a read the kernel does not complete within ReaderOptions::stall_after is read
    // again (io_uring where the kernel can wait with a timeout); pread cannot stall so.
    virtual bool redoes_stalled_reads() const { return false; }
    virtual const File& file() const = 0;

    // Queues a read and returns at once. Throws IoError when the range runs past the end of
    // the file and OutOfBudget when staging memory does not fit staging_budget.
    virtual Ticket submit(const ReadRequest& request) = 0;
    // True once the read finished, successfully or not; never blocks.
    virtual bool poll(Ticket ticket) = 0;
    // Blocks until the read finished, then forgets the ticket. Throws IoError naming the
    // file, offset and errno when it failed. A ticket already waited for returns at once.
    virtual void wait(Ticket ticket) = 0;
    // Waits for every ticket; throws the first failure after all have finished.
    virtual void wait_all() = 0;

    // Lets reads that land inside [base, base + bytes) use registered buffers (io_uring
    // read_fixed, no per-read page pinning). False where unsupported; reads still work.
    // Unregister before the memory goes away.
    virtual bool register_region(void* base, size_t bytes) { return false; }
    virtual void unregister_region(void* base) {}

    virtual ReaderStats stats() const = 0;
    // Records each request, from its submission to its last read's completion, as a slice on
    // the "disk: <backend> <what>" track of `trace` (null: none): the disk queue in a trace.
    virtual void set_trace(Trace* trace) {}

    void read(const ReadRequest& request) { wait(submit(request)); }
};

// The io_uring reader, or the pread pool when io_uring cannot be set up (kernel, seccomp,
// STRATA_IO=pread), saying why in one log line. The reader keeps its own descriptor.
std::unique_ptr<Reader> open_reader(const File& file, const ReaderOptions& options = {});

}  // namespace strata::storage
