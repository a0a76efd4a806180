#pragma once
// Writing a file the user named (a profile, a saved chat) without ever leaving it half-written or
// putting a plain file in place of something that is not one.
#include <filesystem>
#include <string_view>

namespace strata {

// Writes `data` to `path`. A regular file (new or old, or a symlink's target) is replaced whole:
// a temporary file beside it is written and renamed over it, so that a full disk or a kill
// leaves the old file as it was. A device or FIFO (/dev/stdout, a pipe) is written into, never
// renamed over. The folder must exist. Throws UsageError for a folder and IoError (with the system's reason and `hint`)
// when it cannot write; nothing of the attempt is left behind. `what` names the file in errors
// ("the hardware profile").
void write_file_whole(const std::filesystem::path& path, std::string_view data, std::string_view what, std::string_view hint);

}  // namespace strata
