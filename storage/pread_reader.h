#pragma once
// The fallback backend of Reader for machines where io_uring is unavailable: a few
// std::thread workers, each doing one blocking pread per chunk. Same semantics as the
// io_uring reader (chunks, staging, short-read reissue, errors, faults) via ChunkedReader.
#include <memory>

#include "storage/reader.h"

namespace strata::storage {

std::unique_ptr<Reader> make_pread_reader(const File& file, const ReaderOptions& options);

}  // namespace strata::storage
