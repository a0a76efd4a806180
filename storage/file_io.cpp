#include "storage/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <new>
#include <utility>

#include "core/error.h"
#include "core/log.h"

namespace strata::storage {

namespace {

std::string errno_text(int err) { return fmt::format("{} (errno {})", std::strerror(err), err); }

uint64_t file_size(int fd, const std::filesystem::path& path) {
    struct stat st {};
    if (fstat(fd, &st) != 0) throw IoError(fmt::format("cannot stat '{}': {}", path.string(), errno_text(errno)));
    return static_cast<uint64_t>(st.st_size);
}

// statx reports 0/0 for files that support no direct I/O at all (some filesystems still
// accept the open flag); such files are better read through the page cache.
bool dio_refused_by_statx(int fd) {
#ifdef STATX_DIOALIGN
    struct statx stx {};
    if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 && (stx.stx_mask & STATX_DIOALIGN))
        return stx.stx_dio_offset_align == 0;
#else
    (void)fd;
#endif
    return false;
}

}  // namespace

DioAlignment query_dio_alignment(int fd) {
#ifdef STATX_DIOALIGN
    struct statx stx {};
    if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 && (stx.stx_mask & STATX_DIOALIGN) &&
        stx.stx_dio_mem_align != 0 && stx.stx_dio_offset_align != 0)
        return {stx.stx_dio_mem_align, stx.stx_dio_offset_align, true};
#else
    (void)fd;
#endif
    return {};
}

File File::open_read(const std::filesystem::path& path, OpenMode mode) {
    File f;
    f.path_ = path;
    int refused_errno = 0;
    if (mode != OpenMode::Buffered) {
        f.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
        if (f.fd_ >= 0 && dio_refused_by_statx(f.fd_)) {
            ::close(f.fd_);
            f.fd_ = -1;
            errno = EINVAL;
        }
        if (f.fd_ < 0) {
            refused_errno = errno;
            // EINVAL is the filesystem saying "no O_DIRECT"; anything else (ENOENT, EACCES)
            // would fail buffered too, so report it as is.
            if (refused_errno != EINVAL)
                throw IoError(fmt::format("cannot open '{}': {}", path.string(), errno_text(refused_errno)),
                              "check that the file exists and is readable");
            if (mode == OpenMode::Direct)
                throw IoError(fmt::format("'{}' cannot be opened with O_DIRECT: {}", path.string(),
                                          errno_text(refused_errno)),
                              "put the file on a filesystem that supports direct I/O (ext4, xfs)");
        } else {
            f.direct_ = true;
            f.align_ = query_dio_alignment(f.fd_);
        }
    }
    if (f.fd_ < 0) {
        f.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (f.fd_ < 0)
            throw IoError(fmt::format("cannot open '{}': {}", path.string(), errno_text(errno)),
                          "check that the file exists and is readable");
        // Weights are read in long ranges: ask for aggressive readahead.
        (void)posix_fadvise(f.fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
        if (mode == OpenMode::DirectOrBuffered) {
            static std::atomic<bool> warned{false};
            const auto msg = fmt::format("storage: O_DIRECT refused for '{}' ({}); reading through the page cache, "
                                         "which counts against free RAM and hides the disk's speed",
                                         path.string(), std::strerror(refused_errno));
            if (!warned.exchange(true)) STRATA_LOG_WARN("{}", msg);
            else STRATA_LOG_DEBUG("{}", msg);
        }
    }
    f.size_ = file_size(f.fd_, path);
    return f;
}

File::File(File&& o) noexcept { *this = std::move(o); }

File& File::operator=(File&& o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = std::exchange(o.fd_, -1);
        direct_ = o.direct_;
        size_ = o.size_;
        path_ = std::move(o.path_);
        align_ = o.align_;
    }
    return *this;
}

File::~File() {
    if (fd_ >= 0) ::close(fd_);
}

File File::duplicate() const {
    File f;
    f.fd_ = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
    if (f.fd_ < 0) throw IoError(fmt::format("cannot duplicate the descriptor of '{}': {}", path_.string(), errno_text(errno)));
    f.direct_ = direct_;
    f.size_ = size_;
    f.path_ = path_;
    f.align_ = align_;
    return f;
}

AlignedRange aligned_superset(uint64_t offset, uint64_t length, uint64_t align) {
    const uint64_t start = align_down(offset, align);
    const uint64_t end = align_up(offset + length, align);
    return {start, end - start, offset - start};
}

AlignedBuffer allocate_aligned(size_t bytes, size_t align) {
    void* p = nullptr;
    const size_t n = std::max<size_t>(align_up(bytes, align), align);
    if (posix_memalign(&p, std::max(align, sizeof(void*)), n) != 0) throw std::bad_alloc();
    return AlignedBuffer(static_cast<std::byte*>(p));
}

void read_exact(const File& file, uint64_t offset, std::span<std::byte> dst) {
    if (offset + dst.size() > file.size() || offset + dst.size() < offset)
        throw IoError(fmt::format("read past the end of '{}': bytes [{}, {}) requested, the file has {}",
                                  file.path().string(), offset, offset + dst.size(), file.size()));
    const DioAlignment& al = file.alignment();
    constexpr size_t kPiece = 4u << 20;  // bounce buffer size: bounded memory for any length
    AlignedBuffer bounce;
    size_t done = 0;
    while (done < dst.size()) {
        const uint64_t want_off = offset + done;
        const size_t want = std::min(dst.size() - done, kPiece);
        const AlignedRange r = file.direct() ? aligned_superset(want_off, want, al.offset)
                                             : AlignedRange{want_off, want, 0};
        std::byte* buf = dst.data() + done;
        if (file.direct()) {
            if (!bounce) bounce = allocate_aligned(kPiece + 2 * al.offset, std::max(al.memory, kDefaultDioAlign));
            buf = bounce.get();
        }
        // Reads may come back short (signals, EOF of an aligned superset): loop until the
        // wanted bytes are in.
        size_t got = 0;
        while (got < r.skip + want) {
            const ssize_t n = ::pread(file.fd(), buf + got, r.length - got, static_cast<off_t>(r.offset + got));
            if (n < 0 && errno == EINTR) continue;
            if (n < 0)
                throw IoError(fmt::format("read of '{}' failed at offset {} (length {}): {}", file.path().string(),
                                          r.offset + got, r.length - got, errno_text(errno)));
            if (n == 0)
                throw IoError(fmt::format("unexpected end of '{}' at offset {}", file.path().string(), r.offset + got),
                              "the file was truncated while in use");
            got += static_cast<size_t>(n);
        }
        if (file.direct()) std::memcpy(dst.data() + done, buf + r.skip, want);
        done += want;
    }
}

}  // namespace strata::storage
