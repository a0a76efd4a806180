#include "probe/io_rates.h"

#include <fcntl.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "storage/budget.h"
#include "storage/file_io.h"
#include "storage/reader.h"

namespace strata::probe {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

double measure_sequential_read_gbps(const std::filesystem::path& path, uint64_t bytes, unsigned queue_depth) {
    const storage::File file = storage::File::open_read(path, storage::OpenMode::DirectOrBuffered);
    if (!file.direct()) {
        (void)posix_fadvise(file.fd(), 0, 0, POSIX_FADV_DONTNEED);
        STRATA_LOG_WARN("probe: probe of '{}' without O_DIRECT: the page cache may inflate the figure", path.string());
    }
    const uint64_t total = std::min(bytes, file.size());
    if (total == 0) throw IoError("cannot measure read bandwidth on an empty range of '" + path.string() + "'");
    constexpr size_t kRequest = kReadRequestBytes;
    const unsigned depth = std::max(1u, queue_depth);
    storage::ReaderOptions opt;
    opt.queue_depth = depth;
    opt.chunk_bytes = kRequest;
    auto reader = storage::open_reader(file, opt);

    // A ring of `depth` aligned request buffers, each reused once its read is done.
    // Huge-page backed, as the engine's buffers are: pinning 4 KiB pages for each O_DIRECT read
    // would cost CPU time the engine does not pay.
    storage::AlignedBuffer ring = storage::allocate_aligned(depth * kRequest, size_t{2} << 20);
    ::madvise(ring.get(), depth * kRequest, MADV_HUGEPAGE);
    std::memset(ring.get(), 0, depth * kRequest);
    (void)reader->register_region(ring.get(), depth * kRequest);
    std::vector<storage::Ticket> tickets(depth, 0);
    const auto t0 = std::chrono::steady_clock::now();
    uint64_t i = 0;
    for (uint64_t off = 0; off < total; off += kRequest, ++i) {
        const size_t slot = i % depth;
        if (tickets[slot]) reader->wait(tickets[slot]);
        tickets[slot] = reader->submit({ring.get() + slot * kRequest, off, std::min<uint64_t>(kRequest, total - off)});
    }
    reader->wait_all();
    const double s = seconds_since(t0);
    reader->unregister_region(ring.get());
    const double gbps = static_cast<double>(total) / s / 1e9;
    STRATA_LOG_INFO("probe: read {} of '{}' in {:.3f} s with {}, depth {}: {:.2f} GB/s", format_bytes(total),
                    path.string(), s, reader->backend(), depth, gbps);
    return gbps;
}

double measure_dram_copy_gbps(size_t bytes, unsigned threads) {
    if (bytes == 0) throw UsageError("cannot measure DRAM bandwidth with 0 bytes");
    const unsigned n = std::max(1u, threads);
    std::vector<std::byte> src(bytes, std::byte{1}), dst(bytes, std::byte{0});  // touched: no page faults timed
    const size_t per = (bytes + n - 1) / n;
    auto pass = [&] {
        std::vector<std::thread> ts;
        for (unsigned t = 0; t < n; ++t) {
            const size_t lo = std::min(bytes, t * per), hi = std::min(bytes, lo + per);
            ts.emplace_back([&, lo, hi] { std::memcpy(dst.data() + lo, src.data() + lo, hi - lo); });
        }
        for (auto& t : ts) t.join();
    };
    double best = 0;
    for (int rep = 0; rep < 3; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        pass();
        best = std::max(best, static_cast<double>(bytes) / seconds_since(t0) / 1e9);
    }
    return best;
}

}  // namespace strata::probe
