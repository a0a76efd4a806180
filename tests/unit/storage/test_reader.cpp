// storage/reader, uring_reader, pread_reader: both backends read random ranges exactly like a
// plain read; faults, short reads and EOF behave. No timing assertions (the disk is noisy).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <fstream>
#include <memory>
#include <random>
#include <vector>

#include "core/error.h"
#include "storage/budget.h"
#include "storage/pinned_pool.h"
#include "storage/reader.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/skip.h"

using namespace strata;
using namespace strata::storage;

namespace {

struct RandomFile {
    std::filesystem::path path;
    std::vector<std::byte> data;
};

// One shared file per size: writing it is the slow part.
const RandomFile& random_file(size_t size) {
    static std::map<size_t, RandomFile> files;
    auto it = files.find(size);
    if (it != files.end()) return it->second;
    RandomFile f;
    f.path = test::temp_path("reader_" + std::to_string(size) + ".bin");
    std::mt19937_64 rng(size);
    f.data.resize(size);
    for (size_t i = 0; i < size; i += 8) {
        const uint64_t v = rng();
        std::memcpy(f.data.data() + i, &v, std::min<size_t>(8, size - i));
    }
    std::ofstream out(f.path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(f.data.data()), static_cast<std::streamsize>(size));
    out.close();
    return files.emplace(size, std::move(f)).first->second;
}

// The reader for `backend`, or nullptr (with a warning) where io_uring is unavailable.
std::unique_ptr<Reader> make(const File& file, IoBackend backend, ReaderOptions o = {}) {
    o.backend = backend;
    if (!o.fault) o.fault = FaultSpec{};  // immune to a STRATA_FAULT_IO in the environment
    try {
        return open_reader(file, o);
    } catch (const IoError& e) {
        if (backend != IoBackend::Uring) throw;
        STRATA_SKIP_PART("io_uring unavailable, its checks: " << e.what());
        return nullptr;
    }
}

struct Range {
    uint64_t offset;
    size_t length;
    size_t dst_shift;  // where in its buffer the range lands: 0..4095
};

void read_and_compare(Reader& reader, const RandomFile& f, const std::vector<Range>& ranges) {
    std::vector<std::vector<std::byte>> bufs;
    std::vector<Ticket> tickets;
    bufs.reserve(ranges.size());
    // Everything in flight at once, then waited in reverse to mix completion orders.
    for (const Range& r : ranges) {
        bufs.emplace_back(r.length + 2 * 4096, std::byte{0xEE});
        auto* aligned = reinterpret_cast<std::byte*>(align_up(reinterpret_cast<uintptr_t>(bufs.back().data()), 4096));
        tickets.push_back(reader.submit({aligned + r.dst_shift, r.offset, r.length}));
    }
    for (size_t i = ranges.size(); i-- > 0;) reader.wait(tickets[i]);
    for (size_t i = 0; i < ranges.size(); ++i) {
        const Range& r = ranges[i];
        auto* aligned = reinterpret_cast<std::byte*>(align_up(reinterpret_cast<uintptr_t>(bufs[i].data()), 4096));
        const std::byte* got = aligned + r.dst_shift;
        INFO("range " << i << ": offset " << r.offset << " length " << r.length << " dst shift " << r.dst_shift);
        REQUIRE(std::equal(got, got + r.length, f.data.begin() + r.offset));
        REQUIRE(got[r.length] == std::byte{0xEE});  // nothing written past the end
        if (r.dst_shift > 0) REQUIRE(got[-1] == std::byte{0xEE});
    }
}

std::vector<Range> random_ranges(size_t file_size, size_t max_len, int n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<Range> out;
    for (int i = 0; i < n; ++i) {
        const uint64_t off = (i % 4 == 0) ? rng() % (file_size / 4096) * 4096 : rng() % file_size;
        const size_t cap = std::min<uint64_t>(max_len, file_size - off);
        size_t len = (i % 7 == 0) ? cap : rng() % (cap + 1);
        if (i % 4 == 0) len = len / 4096 * 4096;  // some fully aligned requests
        const size_t shift = (i % 4 == 0) ? 0 : (i % 3 == 0 ? off % 4096 : rng() % 4096);
        out.push_back({off, len, shift});
    }
    out.push_back({file_size - 1, 1, 0});           // the last byte
    out.push_back({0, file_size, 0});               // the whole file
    out.push_back({file_size - 5000, 5000, 4096 - 5000 % 4096});  // the unaligned tail
    out.push_back({12345, 0, 0});                   // nothing
    return out;
}

}  // namespace

TEST_CASE("both readers return the same bytes as a plain read", "[unit][storage]") {
    const RandomFile& f = random_file((6u << 20) + 4321);
    for (OpenMode mode : {OpenMode::DirectOrBuffered, OpenMode::Buffered}) {
        const File file = File::open_read(f.path, mode);
        for (IoBackend backend : {IoBackend::Uring, IoBackend::Pread}) {
            for (size_t chunk : {size_t{64} << 10, size_t{1} << 20}) {
                ReaderOptions o;
                o.chunk_bytes = chunk;
                o.queue_depth = 8;
                o.staging_slots = 3;  // fewer than reads in flight: they must queue for staging
                auto reader = make(file, backend, o);
                if (!reader) continue;
                INFO(reader->backend() << (file.direct() ? " direct" : " buffered") << ", chunk " << chunk);
                read_and_compare(*reader, f, random_ranges(f.data.size(), 2 * chunk + 777, 150, chunk + file.direct()));
                const ReaderStats s = reader->stats();
                CHECK(s.n_requests == 154);
                CHECK(s.bytes_read >= s.bytes_requested);
                CHECK(s.busy_seconds > 0);
                if (file.direct()) CHECK(s.n_bounced > 0);
            }
        }
    }
}

TEST_CASE("an injected EIO surfaces as an IoError naming file and offset", "[unit][storage]") {
    const RandomFile& f = random_file((6u << 20) + 4321);
    const File file = File::open_read(f.path);
    for (IoBackend backend : {IoBackend::Uring, IoBackend::Pread}) {
        ReaderOptions o;
        o.chunk_bytes = 64 << 10;
        o.queue_depth = 1;  // reads are issued in plan order, so the 2nd read is the 2nd chunk
        o.pread_threads = 1;
        o.fault = FaultSpec{FaultKind::Eio, 2};
        auto reader = make(file, backend, o);
        if (!reader) continue;
        INFO(reader->backend());
        std::vector<std::byte> buf(f.data.size());
        const uint64_t offset = 1 << 20;
        const Ticket bad = reader->submit({buf.data(), offset, 4 * (64 << 10)});
        try {
            reader->wait(bad);
            FAIL("no error");
        } catch (const IoError& e) {
            const std::string what = e.what();
            INFO(what);
            CHECK(what.find(f.path.filename().string()) != std::string::npos);
            CHECK(what.find("offset " + std::to_string(offset + (64 << 10))) != std::string::npos);
            CHECK(what.find("Input/output error") != std::string::npos);
            CHECK(what.find("errno 5") != std::string::npos);
            CHECK(!e.hint().empty());
        }
        // The fault fired once: the reader goes on working.
        read_and_compare(*reader, f, {{4096, 300000, 0}, {777, 5000, 33}});
        CHECK_NOTHROW(reader->wait(bad));  // a ticket already waited for
        CHECK_THROWS_AS(reader->wait(999999), UsageError);
    }
}

TEST_CASE("STRATA_FAULT_IO injects faults without code changes", "[unit][storage]") {
    const RandomFile& f = random_file((6u << 20) + 4321);
    const File file = File::open_read(f.path);
    setenv("STRATA_FAULT_IO", "eio:1", 1);
    ReaderOptions o;
    o.backend = IoBackend::Pread;
    auto reader = open_reader(file, o);
    unsetenv("STRATA_FAULT_IO");
    std::vector<std::byte> buf(8192);
    CHECK_THROWS_AS(reader->read({buf.data(), 0, buf.size()}), IoError);
    CHECK_NOTHROW(reader->read({buf.data(), 0, buf.size()}));
}

TEST_CASE("injected short reads are reissued and complete correctly", "[unit][storage]") {
    const RandomFile& f = random_file((6u << 20) + 4321);
    for (OpenMode mode : {OpenMode::DirectOrBuffered, OpenMode::Buffered}) {
        const File file = File::open_read(f.path, mode);
        for (IoBackend backend : {IoBackend::Uring, IoBackend::Pread}) {
            for (uint64_t nth : {1u, 3u, 10u}) {
                ReaderOptions o;
                o.chunk_bytes = 64 << 10;
                o.fault = FaultSpec{FaultKind::Short, nth};
                auto reader = make(file, backend, o);
                if (!reader) continue;
                INFO(reader->backend() << (file.direct() ? " direct" : " buffered") << ", short read " << nth);
                read_and_compare(*reader, f, random_ranges(f.data.size(), 300000, 20, nth));
                CHECK(reader->stats().n_short_reads == 1);
            }
        }
    }
}

TEST_CASE("reads past the end of the file are errors", "[unit][storage]") {
    const RandomFile& f = random_file((6u << 20) + 4321);
    const File file = File::open_read(f.path);
    for (IoBackend backend : {IoBackend::Uring, IoBackend::Pread}) {
        auto reader = make(file, backend);
        if (!reader) continue;
        INFO(reader->backend());
        std::vector<std::byte> buf(8192);
        const uint64_t size = f.data.size();
        try {
            reader->submit({buf.data(), size - 10, 20});
            FAIL("accepted");
        } catch (const IoError& e) {
            CHECK(std::string(e.what()).find("past the end") != std::string::npos);
            CHECK(std::string(e.what()).find(std::to_string(size)) != std::string::npos);
        }
        CHECK_THROWS_AS(reader->submit({buf.data(), size + 1, 0}), IoError);
        CHECK_THROWS_AS(reader->submit({buf.data(), ~uint64_t{0} - 5, 10}), IoError);  // no wrap-around
        CHECK_NOTHROW(reader->read({buf.data(), size - 10, 10}));
        CHECK_THROWS_AS(reader->submit({nullptr, 0, 10}), UsageError);
    }
}

TEST_CASE("a file truncated under the reader gives an end-of-file error", "[unit][storage]") {
    const auto path = test::temp_path("reader_truncated.bin");
    {
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        std::vector<char> zeros(1 << 20, 'z');
        out.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
    }
    const File file = File::open_read(path);
    for (IoBackend backend : {IoBackend::Uring, IoBackend::Pread}) {
        auto reader = make(file, backend);
        if (!reader) continue;
        INFO(reader->backend());
        std::filesystem::resize_file(path, 100000);
        std::vector<std::byte> buf(200000);
        try {
            reader->read({buf.data(), 500000, buf.size()});
            FAIL("read a truncated range");
        } catch (const IoError& e) {
            CHECK(std::string(e.what()).find("unexpected end") != std::string::npos);
        }
        std::filesystem::resize_file(path, 1 << 20);
    }
}

TEST_CASE("reads into a registered pinned pool use fixed buffers", "[unit][storage]") {
    const RandomFile& f = random_file((6u << 20) + 4321);
    const File file = File::open_read(f.path);
    MemoryBudget budget("DRAM", uint64_t{64} << 20);
    PinnedPoolOptions po;
    po.slot_bytes = 2 << 20;
    po.n_slots = 3;
    po.pinner = nullptr;
    PinnedPool pool(budget, po);
    for (IoBackend backend : {IoBackend::Uring, IoBackend::Pread}) {
        ReaderOptions o;
        o.staging_budget = &budget;
        auto reader = make(file, backend, o);
        if (!reader) continue;
        INFO(reader->backend());
        const bool registered = reader->register_region(pool.data(), pool.bytes());
        CHECK(registered == (reader->backend() == "io_uring"));
        // A ring of layer buffers: ranges land at their offset within an aligned block, so
        // only partial end blocks go through staging.
        std::vector<PinnedSlot> slots;
        std::vector<Ticket> tickets;
        const uint64_t offsets[] = {0, 1000, 3 << 20};
        for (uint64_t off : offsets) {
            slots.push_back(pool.acquire());
            tickets.push_back(reader->submit({slots.back().data() + off % 4096, off, (1 << 20) + 5}));
        }
        for (size_t i = 0; i < tickets.size(); ++i) {
            reader->wait(tickets[i]);
            const std::byte* got = slots[i].data() + offsets[i] % 4096;
            CHECK(std::equal(got, got + (1 << 20) + 5, f.data.begin() + offsets[i]));
        }
        if (registered && file.direct()) CHECK(reader->stats().n_fixed > 0);
        reader->unregister_region(pool.data());
        // Staging memory was accounted in the budget next to the pool.
        if (file.direct()) CHECK(budget.used() > pool.bytes());
    }
}

TEST_CASE("staging memory that does not fit the budget is refused", "[unit][storage]") {
    const RandomFile& f = random_file((6u << 20) + 4321);
    const File file = File::open_read(f.path);
    if (!file.direct()) STRATA_SKIP("the filesystem refuses O_DIRECT, and buffered reads need no staging");
    MemoryBudget tiny("DRAM", 4096);
    ReaderOptions o;
    o.staging_budget = &tiny;
    auto reader = make(file, IoBackend::Pread, o);
    std::vector<std::byte> buf(100);
    CHECK_THROWS_AS(reader->submit({buf.data(), 1, 100}), OutOfBudget);
}

TEST_CASE("STRATA_IO=pread selects the pread pool", "[unit][storage]") {
    const RandomFile& f = random_file((6u << 20) + 4321);
    const File file = File::open_read(f.path);
    setenv("STRATA_IO", "pread", 1);
    auto forced = open_reader(file);
    setenv("STRATA_IO", "bogus", 1);
    CHECK_THROWS_AS(open_reader(file), UsageError);
    unsetenv("STRATA_IO");
    CHECK(forced->backend() == "pread");
    read_and_compare(*forced, f, {{0, 4096, 0}, {1, 100000, 5}});
}

TEST_CASE("a reader can be destroyed with reads in flight", "[unit][storage]") {
    const RandomFile& f = random_file((6u << 20) + 4321);
    const File file = File::open_read(f.path);
    std::vector<std::byte> buf(f.data.size());
    for (IoBackend backend : {IoBackend::Uring, IoBackend::Pread}) {
        auto reader = make(file, backend);
        if (!reader) continue;
        for (int i = 0; i < 8; ++i) reader->submit({buf.data(), 0, buf.size()});
        reader.reset();  // must wait for the kernel to stop writing into buf
    }
}

TEST_CASE("when io_uring cannot be set up the pread pool takes over", "[unit][storage]") {
    const RandomFile& f = random_file((6u << 20) + 4321);
    const File file = File::open_read(f.path);
    // More entries than the kernel allows (32768) makes io_uring_queue_init fail.
    ReaderOptions o;
    o.queue_depth = 1 << 20;
    o.pread_threads = 2;
    o.fault = FaultSpec{};
    auto reader = open_reader(file, o);
    CHECK(reader->backend() == "pread");
    read_and_compare(*reader, f, random_ranges(f.data.size(), 100000, 10, 5));
    o.backend = IoBackend::Uring;
    try {
        open_reader(file, o);
        FAIL("io_uring set up");
    } catch (const IoError& e) {
        CHECK(std::string(e.what()).find("io_uring_queue_init") != std::string::npos);
    }
}

TEST_CASE("an io_uring read the kernel never completes is read again with pread, not waited for for ever", "[unit][storage]") {
    const RandomFile& f = random_file((3u << 20) + 777);
    for (OpenMode mode : {OpenMode::DirectOrBuffered, OpenMode::Buffered}) {
        const File file = File::open_read(f.path, mode);
        for (uint64_t nth : {1u, 4u}) {
            ReaderOptions o;
            o.chunk_bytes = 64 << 10;
            o.fault = FaultSpec{FaultKind::Lost, nth};
            o.stall_after = std::chrono::milliseconds(1000);
            auto reader = make(file, IoBackend::Uring, o);
            if (!reader) continue;
            if (!reader->redoes_stalled_reads()) {
                STRATA_SKIP_PART("this kernel's io_uring cannot wait with a timeout (before 5.11): stalled reads are not looked for");
                continue;
            }
            INFO((file.direct() ? "direct" : "buffered") << ", completion " << nth << " lost");
            read_and_compare(*reader, f, random_ranges(f.data.size(), 300000, 12, nth));
            CHECK(reader->stats().n_stalled >= 1);  // (a read merely slow past the limit is read again too)
        }
    }
}
