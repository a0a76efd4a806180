#pragma once
// The io_uring backend of Reader: O_DIRECT reads of aligned chunks, a registered file,
// registered buffers (read_fixed) for memory passed to register_region and for staging,
// up to `queue_depth` reads in flight, and one reaper thread that sleeps in
// io_uring_wait_cqe (no busy waiting) and refills the queue as reads complete, so the
// disk stays busy while the caller computes.
#include <memory>

#include "storage/reader.h"

namespace strata::storage {

// Throws IoError with the reason (errno of io_uring_queue_init) when io_uring cannot be
// set up; open_reader() then falls back to the pread pool.
std::unique_ptr<Reader> make_uring_reader(const File& file, const ReaderOptions& options);

}  // namespace strata::storage
