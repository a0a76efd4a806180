#pragma once
// Raw bandwidth measurements that `strata probe` reports and the planner's hardware
// profile uses: what the disk and DRAM can do, before any model is involved.
#include <cstddef>
#include <cstdint>
#include <filesystem>

namespace strata::probe {

// The request size of measure_sequential_read_gbps: the chunk the engine's reader splits reads
// into (storage::ReaderOptions::chunk_bytes), so `queue_depth` requests are that many chunks.
constexpr size_t kReadRequestBytes = size_t{1} << 20;

// Reads the first `bytes` of `path` (all of it if shorter) sequentially with the io_uring
// reader (pread pool where io_uring is unavailable) in 1 MiB requests, `queue_depth` in
// flight, with O_DIRECT so the page cache neither helps nor hides the disk. Returns GB/s
// (1e9 bytes/s). Without O_DIRECT the file's cached pages are dropped first (best effort;
// a WARN says so). Throws IoError when the file cannot be read.
double measure_sequential_read_gbps(const std::filesystem::path& path, uint64_t bytes, unsigned queue_depth = 32);

// memcpy between two `bytes`-sized buffers (pre-faulted) split over `threads` threads;
// the best of three passes, in GB/s of bytes copied.
double measure_dram_copy_gbps(size_t bytes, unsigned threads);

}  // namespace strata::probe
