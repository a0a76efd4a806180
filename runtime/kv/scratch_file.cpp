#include "runtime/kv/scratch_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "core/bytes.h"
#include "core/error.h"
#include "core/log.h"

namespace strata::runtime {

namespace {
[[noreturn]] void scratch_error(const std::filesystem::path& dir, const std::string& what, const std::string& flag,
                                const std::string& problem, int err) {
    throw IoError(fmt::format("{} in '{}': {}: {}", what, dir.string(), problem, std::strerror(err)),
                  err == ENOSPC ? fmt::format("free disk space there, point {} at another directory, or use a smaller --ctx", flag)
                                : fmt::format("point {} at a writable directory", flag));
}
}  // namespace

ScratchFile::ScratchFile(const std::filesystem::path& dir, std::string what, std::string flag, uint64_t bytes)
    : dir_(dir), what_(std::move(what)), flag_(std::move(flag)) {
    std::error_code ec;
    for (auto d = std::filesystem::absolute(dir, ec); !d.empty() && !std::filesystem::exists(d, ec) && d != d.parent_path();
         d = d.parent_path())
        created_.push_back(d);
    std::filesystem::create_directories(dir, ec);
    std::string path = (dir / "strata-kv-XXXXXX").string();
    fd_ = ::mkstemp(path.data());
    if (fd_ < 0) {
        const int err = errno;
        remove_created();
        scratch_error(dir, what_, flag_, "cannot create it", err);
    }
    if (::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_DIRECT) != 0)
        STRATA_LOG_WARN("kv: O_DIRECT refused for the {} in {}; using buffered I/O", what_, dir.string());
    if (int err = ::posix_fallocate(fd_, 0, static_cast<off_t>(bytes)); err != 0) {
        ::close(fd_);
        ::unlink(path.c_str());
        remove_created();
        scratch_error(dir, what_, flag_, fmt::format("cannot reserve {}", format_bytes(bytes)), err);
    }
    try {
        read_ = storage::File::open_read(path, storage::OpenMode::DirectOrBuffered);
    } catch (...) {  // the constructor fails: nothing of it stays on disk
        ::close(fd_);
        ::unlink(path.c_str());
        remove_created();
        throw;
    }
    ::unlink(path.c_str());
}

ScratchFile::~ScratchFile() {
    if (fd_ >= 0) ::close(fd_);
    remove_created();
}

void ScratchFile::remove_created() {
    std::error_code ec;  // a folder another file has come to use since stays: only empty ones go
    for (const auto& d : created_) std::filesystem::remove(d, ec);
    created_.clear();
}

void ScratchFile::write(uint64_t offset, std::span<const std::byte> src) const {
    for (uint64_t done = 0; done < src.size();) {
        const ssize_t w = ::pwrite(fd_, src.data() + done, src.size() - done, static_cast<off_t>(offset + done));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0)
            throw IoError(fmt::format("writing {} of the {} at offset {}: {}", format_bytes(src.size()), what_, offset,
                                      w < 0 ? std::strerror(errno) : "no progress"),
                          fmt::format("check the disk that holds {} ({})", dir_.string(), flag_));
        done += static_cast<uint64_t>(w);
    }
}

}  // namespace strata::runtime
