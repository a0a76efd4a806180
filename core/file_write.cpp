#include "core/file_write.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "core/error.h"

namespace strata {

void write_file_whole(const std::filesystem::path& path, std::string_view data, std::string_view what, std::string_view hint) {
    namespace fs = std::filesystem;
    std::error_code ec;
    auto write_to = [&](const fs::path& file) {
        std::ofstream out(file, std::ios::binary | std::ios::trunc);
        out.write(data.data(), static_cast<std::streamsize>(data.size()));
        out.flush();
        if (!out) throw IoError(fmt::format("cannot write {} '{}': {}", what, path.string(), std::strerror(errno)), std::string(hint));
    };
    const fs::path target = fs::is_symlink(path, ec) ? fs::weakly_canonical(path, ec) : path;
    const fs::file_status st = fs::status(target, ec);
    if (fs::is_directory(st))
        throw UsageError(fmt::format("'{}' is a folder, not a file for {}", path.string(), what), std::string(hint));
    if (fs::exists(st) && !fs::is_regular_file(st)) return write_to(target);
    const fs::path tmp = fmt::format("{}.{}.tmp", target.string(), ::getpid());  // several processes may write at once
    try {
        write_to(tmp);
    } catch (const IoError&) {
        fs::remove(tmp, ec);
        throw;
    }
    fs::rename(tmp, target, ec);
    if (ec) {
        std::error_code ignored;
        fs::remove(tmp, ignored);
        throw IoError(fmt::format("cannot write {} '{}': {}", what, path.string(), ec.message()), std::string(hint));
    }
}

}  // namespace strata
