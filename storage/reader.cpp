#include <atomic>
#include <cstdlib>
#include <fmt/format.h>
#include <string_view>

#include "core/error.h"
#include "core/log.h"
#include "storage/pread_reader.h"
#include "storage/reader.h"
#include "storage/uring_reader.h"

namespace strata::storage {

namespace {

IoBackend backend_from_env() {
    const char* env = std::getenv("STRATA_IO");
    if (!env || !*env) return IoBackend::Auto;
    const std::string_view v = env;
    if (v == "pread") return IoBackend::Pread;
    if (v == "uring" || v == "io_uring") return IoBackend::Uring;
    if (v == "auto") return IoBackend::Auto;
    throw UsageError(fmt::format("invalid STRATA_IO '{}'", v), "use STRATA_IO=uring, pread or auto");
}

}  // namespace

std::unique_ptr<Reader> open_reader(const File& file, const ReaderOptions& options) {
    IoBackend backend = options.backend;
    if (backend == IoBackend::Auto) {
        backend = backend_from_env();
        if (backend == IoBackend::Pread) {
            STRATA_LOG_INFO("storage: reading with a pread thread pool (STRATA_IO=pread)");
            return make_pread_reader(file, options);
        }
    }
    if (backend == IoBackend::Pread) return make_pread_reader(file, options);
    if (backend == IoBackend::Uring) return make_uring_reader(file, options);
    try {
        return make_uring_reader(file, options);
    } catch (const IoError& e) {
        // A degraded path: say why once per process, then quietly.
        static std::atomic<bool> warned{false};
        const auto msg = fmt::format("storage: io_uring unavailable ({}); reading with a pread thread pool", e.what());
        if (!warned.exchange(true)) STRATA_LOG_WARN("{}", msg);
        else STRATA_LOG_DEBUG("{}", msg);
        return make_pread_reader(file, options);
    }
}

}  // namespace strata::storage
