#include "storage/pread_reader.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <thread>
#include <vector>

#include "core/log.h"
#include "storage/chunked_reader.h"

namespace strata::storage {

namespace {

class PreadReader final : public ChunkedReader {
public:
    PreadReader(const File& file, const ReaderOptions& options)
        : ChunkedReader(file, options, std::max(1u, options.pread_threads)) {
        const unsigned n = std::max(1u, options.pread_threads);
        for (unsigned i = 0; i < n; ++i) workers_.emplace_back([this] { work(); });
        STRATA_LOG_DEBUG("storage: pread reader for '{}': {} threads, chunk {}, {}", file_.path().string(), n,
                         format_bytes(chunk_bytes_), file_.direct() ? "O_DIRECT" : "buffered");
    }

    ~PreadReader() override {
        drain();
        {
            std::lock_guard lk(mu_);
            stop_ = true;
        }
        work_cv_.notify_all();
        for (auto& t : workers_) t.join();
    }

    std::string_view backend() const override { return "pread"; }

private:
    void dispatch_locked() override { work_cv_.notify_all(); }

    void work() {
        for (;;) {
            ChunkPtr c;
            {
                std::unique_lock lk(mu_);
                work_cv_.wait(lk, [&] { return stop_ || (c = next_chunk_locked()) != nullptr; });
                if (!c) return;
            }
            // One pread per issue, like one SQE: short results go back through complete().
            long r;
            do {
                r = ::pread(file_.fd(), c->buf, c->length, static_cast<off_t>(c->file_offset));
            } while (r < 0 && errno == EINTR);
            if (r < 0) r = -errno;
            complete(std::move(c), r);
        }
    }

    std::condition_variable work_cv_;
    std::vector<std::thread> workers_;
    bool stop_ = false;
};

}  // namespace

std::unique_ptr<Reader> make_pread_reader(const File& file, const ReaderOptions& options) {
    return std::make_unique<PreadReader>(file, options);
}

}  // namespace strata::storage
