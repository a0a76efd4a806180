#pragma once
// How one requested byte range becomes device reads: split into chunks so the queue stays
// full, aligned for O_DIRECT, and read straight into the caller's buffer when its address
// allows it, else through a staging ("bounce") buffer. Pure, so it is tested on its own.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace strata::storage {

struct FileGeometry {
    uint64_t size = 0;
    bool direct = false;
    size_t offset_align = 1;  // file offsets and lengths (O_DIRECT)
    size_t memory_align = 1;  // buffer addresses (O_DIRECT)
};

struct PlannedRead {
    uint64_t file_offset = 0;  // where the device read starts
    size_t length = 0;         // bytes to read; aligned when direct (may run past EOF)
    size_t need = 0;           // bytes from file_offset that must arrive (the rest is past EOF)
    size_t skip = 0;           // the wanted bytes start this far into what is read ...
    size_t copy_len = 0;       // ... are this many ...
    size_t dst_offset = 0;     // ... and belong at dst + dst_offset
    bool bounce = false;       // read into staging and copy; else straight into dst + dst_offset
};

// `chunk_bytes` must be a multiple of both alignments. Direct reads whose destination is
// congruent with the file offset (dst - offset is memory-aligned) bounce only the partial
// blocks at either end; otherwise every chunk bounces. No read is longer than chunk_bytes.
std::vector<PlannedRead> plan_reads(const void* dst, uint64_t offset, size_t length, const FileGeometry& geo,
                                    size_t chunk_bytes);

}  // namespace strata::storage
