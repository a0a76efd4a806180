#pragma once
// Files read with O_DIRECT (the page cache would double-count weights against the DRAM
// budget and hide the disk's real speed), plus the alignment arithmetic O_DIRECT needs.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <span>

namespace strata::storage {

// Used when the kernel or filesystem cannot tell us (no STATX_DIOALIGN): safe everywhere.
inline constexpr size_t kDefaultDioAlign = 4096;

// What O_DIRECT asks of a read: buffer address and file offset/length multiples.
struct DioAlignment {
    size_t memory = kDefaultDioAlign;
    size_t offset = kDefaultDioAlign;
    bool from_statx = false;  // false: the 4096 default
};

// statx(STATX_DIOALIGN) when the kernel (>= 6.1) and filesystem report it, else 4096/4096.
DioAlignment query_dio_alignment(int fd);

enum class OpenMode {
    Direct,            // O_DIRECT or IoError
    DirectOrBuffered,  // O_DIRECT; buffered + posix_fadvise (one WARN) when the filesystem refuses
    Buffered,          // the page cache, on purpose
};

// A read-only file descriptor that knows its size and how it must be read.
class File {
public:
    // Throws IoError (naming the path and errno) when the file cannot be opened.
    static File open_read(const std::filesystem::path& path, OpenMode mode = OpenMode::DirectOrBuffered);

    File() = default;
    File(File&& o) noexcept;
    File& operator=(File&& o) noexcept;
    File(const File&) = delete;
    File& operator=(const File&) = delete;
    ~File();

    // A second descriptor on the same open file (shares O_DIRECT and position-free reads),
    // so a reader can outlive the File it was made from.
    File duplicate() const;

    int fd() const { return fd_; }
    bool is_open() const { return fd_ >= 0; }
    bool direct() const { return direct_; }
    uint64_t size() const { return size_; }
    const std::filesystem::path& path() const { return path_; }
    // Alignment reads of this descriptor need: the DIO alignment when direct, 1/1 otherwise.
    const DioAlignment& alignment() const { return align_; }

private:
    int fd_ = -1;
    bool direct_ = false;
    uint64_t size_ = 0;
    std::filesystem::path path_;
    DioAlignment align_{1, 1, false};
};

constexpr uint64_t align_down(uint64_t v, uint64_t a) { return v / a * a; }
constexpr uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
constexpr bool is_aligned(uint64_t v, uint64_t a) { return v % a == 0; }
inline bool is_aligned(const void* p, uint64_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

// The smallest aligned range covering [offset, offset + length): read `length` bytes of it
// into an aligned buffer, and the wanted bytes start `skip` bytes in.
struct AlignedRange {
    uint64_t offset = 0;
    uint64_t length = 0;
    uint64_t skip = 0;
};
AlignedRange aligned_superset(uint64_t offset, uint64_t length, uint64_t align);

struct AlignedFree {
    void operator()(std::byte* p) const noexcept { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<std::byte[], AlignedFree>;
// `bytes` rounded up to `align` (a power of two); throws std::bad_alloc.
AlignedBuffer allocate_aligned(size_t bytes, size_t align = kDefaultDioAlign);

// Synchronous reference read of exactly dst.size() bytes at `offset`, any alignment (bounces
// through an aligned buffer when the file is O_DIRECT). Throws IoError on errors and EOF.
void read_exact(const File& file, uint64_t offset, std::span<std::byte> dst);

}  // namespace strata::storage
