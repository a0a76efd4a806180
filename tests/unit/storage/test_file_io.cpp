// storage/file_io: O_DIRECT open and fallback, DIO alignment, aligned ranges and buffers,
// and the synchronous reference read.
#include <catch2/catch.hpp>

#include <fstream>
#include <random>
#include <vector>

#include "core/error.h"
#include "storage/file_io.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/skip.h"

using namespace strata;
using namespace strata::storage;

namespace {

std::vector<std::byte> random_bytes(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<std::byte> v(n);
    for (auto& b : v) b = static_cast<std::byte>(rng() & 0xff);
    return v;
}

void write_file(const std::filesystem::path& p, const std::vector<std::byte>& data) {
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

}  // namespace

TEST_CASE("the aligned superset covers the range exactly as far as needed", "[unit][storage]") {
    std::mt19937_64 rng(42);
    for (uint64_t align : {512u, 4096u, 65536u}) {
        for (int i = 0; i < 20000; ++i) {
            const uint64_t off = rng() % (uint64_t{1} << 40);
            const uint64_t len = (i % 4 == 0) ? rng() % 3 : rng() % (uint64_t{8} << 20);
            const AlignedRange r = aligned_superset(off, len, align);
            INFO("offset " << off << " length " << len << " align " << align);
            REQUIRE(r.offset % align == 0);
            REQUIRE(r.length % align == 0);
            REQUIRE(r.offset <= off);
            REQUIRE(r.offset + r.skip == off);
            REQUIRE(r.offset + r.length >= off + len);
            // Minimal: dropping a block at either end would lose wanted bytes.
            REQUIRE(r.skip < align);
            REQUIRE(r.offset + r.length - (off + len) < align);
        }
    }
    const AlignedRange r = aligned_superset(4096, 4096, 4096);
    CHECK((r.offset == 4096 && r.length == 4096 && r.skip == 0));
    CHECK(align_up(1, 512) == 512);
    CHECK(align_down(1023, 512) == 512);
    CHECK(is_aligned(uint64_t{8192}, 4096));
}

TEST_CASE("aligned buffers are aligned and rounded up", "[unit][storage]") {
    for (size_t align : {512u, 4096u, 2u << 20}) {
        AlignedBuffer b = allocate_aligned(1000, align);
        CHECK(is_aligned(b.get(), align));
        b[999] = std::byte{7};  // writable to the requested size
    }
}

TEST_CASE("files open with O_DIRECT where the filesystem allows it", "[unit][storage]") {
    const auto path = test::temp_path("file_io_direct.bin");
    const auto data = random_bytes(100000, 1);
    write_file(path, data);

    const File f = File::open_read(path);
    CHECK(f.is_open());
    CHECK(f.size() == data.size());
    CHECK(f.path() == path);
    if (!f.direct()) STRATA_SKIP_PART("the build directory's filesystem refuses O_DIRECT: the direct checks");
    if (f.direct()) {
        const DioAlignment a = f.alignment();
        CHECK(a.offset >= 1);
        CHECK((a.offset & (a.offset - 1)) == 0);
        CHECK((a.memory & (a.memory - 1)) == 0);
        CHECK(a.offset <= kDefaultDioAlign * 16);
    }
    const File buffered = File::open_read(path, OpenMode::Buffered);
    CHECK_FALSE(buffered.direct());
    CHECK(buffered.alignment().offset == 1);

    const File dup = f.duplicate();
    CHECK(dup.fd() != f.fd());
    CHECK(dup.direct() == f.direct());
    CHECK(dup.size() == f.size());
}

TEST_CASE("a filesystem that refuses O_DIRECT falls back to buffered reads", "[unit][storage]") {
    // procfs rejects O_DIRECT at open with EINVAL, like some network and FUSE filesystems.
    const File f = File::open_read("/proc/self/status");
    CHECK_FALSE(f.direct());
    CHECK_THROWS_AS(File::open_read("/proc/self/status", OpenMode::Direct), IoError);
}

TEST_CASE("opening a missing file is an IoError naming it", "[unit][storage]") {
    try {
        File::open_read(test::temp_path("no_such_file.bin"));
        FAIL("opened");
    } catch (const IoError& e) {
        CHECK(std::string(e.what()).find("no_such_file.bin") != std::string::npos);
        CHECK(std::string(e.what()).find("No such file") != std::string::npos);
    }
}

TEST_CASE("read_exact returns any byte range, direct or buffered", "[unit][storage]") {
    const auto path = test::temp_path("file_io_read_exact.bin");
    const auto data = random_bytes((5u << 20) + 333, 2);
    write_file(path, data);
    std::mt19937_64 rng(7);
    for (OpenMode mode : {OpenMode::DirectOrBuffered, OpenMode::Buffered}) {
        const File f = File::open_read(path, mode);
        for (int i = 0; i < 50; ++i) {
            const uint64_t off = rng() % data.size();
            const size_t len = (i == 0) ? data.size() - off : rng() % std::min<uint64_t>(data.size() - off, 9u << 20);
            std::vector<std::byte> out(len + 1, std::byte{0xEE});
            read_exact(f, off, std::span(out).first(len));
            INFO("offset " << off << " length " << len);
            REQUIRE(std::equal(out.begin(), out.begin() + len, data.begin() + off));
            REQUIRE(out[len] == std::byte{0xEE});  // nothing written past the end
        }
        std::vector<std::byte> out(10);
        CHECK_THROWS_AS(read_exact(f, data.size() - 5, out), IoError);
    }
}
