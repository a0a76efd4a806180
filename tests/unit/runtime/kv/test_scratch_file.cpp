// A KV scratch file leaves nothing behind: the file is unlinked at once, and the folders made
// for it go with it; folders that were there stay.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "runtime/kv/scratch_file.h"
#include "tests/support/gguf_writer.h"

using namespace strata;

TEST_CASE("kv scratch file: the folders it made are removed with it, the ones that were there stay", "[unit][kv]") {
    const auto root = test::temp_path("scratch_folders");
    std::filesystem::remove_all(root);
    std::filesystem::create_directories(root);
    {
        const runtime::ScratchFile f(root / "made" / "deeper", "KV spill file", "--kv-spill", 1 << 20);
        CHECK(std::filesystem::is_directory(root / "made" / "deeper"));
        CHECK(std::filesystem::is_empty(root / "made" / "deeper"));  // unlinked at once
    }
    CHECK_FALSE(std::filesystem::exists(root / "made"));
    CHECK(std::filesystem::exists(root));
    // A folder holding something of the user's is left as it is.
    std::filesystem::create_directories(root / "kept");
    std::ofstream(root / "kept" / "note.txt") << "mine";
    { const runtime::ScratchFile f(root / "kept" / "new", "KV spill file", "--kv-spill", 1 << 20); }
    CHECK_FALSE(std::filesystem::exists(root / "kept" / "new"));
    CHECK(std::filesystem::exists(root / "kept" / "note.txt"));
    std::filesystem::remove_all(root);
}
