#pragma once
// An unlinked scratch file for KV data that must not outlive the process (it disappears at
// exit, also on Ctrl-C or a crash), written and read with O_DIRECT where the filesystem allows
// it (spilled KV would otherwise sit in the page cache, counted against nobody's budget),
// its bytes reserved up front so a full disk shows at once.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <vector>
#include <span>
#include <string>

#include "storage/file_io.h"

namespace strata::runtime {

class ScratchFile {
public:
    // `what` names it in errors ("KV spill file"); `flag` is the option that moves it
    // ("--kv-spill"). Throws IoError naming the directory, and how to fix it.
    ScratchFile(const std::filesystem::path& dir, std::string what, std::string flag, uint64_t bytes);
    ~ScratchFile();
    ScratchFile(const ScratchFile&) = delete;
    ScratchFile& operator=(const ScratchFile&) = delete;

    const storage::File& file() const { return read_; }  // for readers
    // Writes all of `src` at `offset` (aligned as the file's O_DIRECT needs); throws IoError.
    void write(uint64_t offset, std::span<const std::byte> src) const;

private:
    void remove_created();
    std::filesystem::path dir_;
    std::vector<std::filesystem::path> created_;  // the folders it made for the file, deepest first: removed with it
    std::string what_, flag_;
    int fd_ = -1;
    storage::File read_;
};

}  // namespace strata::runtime
