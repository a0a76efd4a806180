// probe/probe: the profile written where -o names, never putting a plain file in place of a
// FIFO, a device or a symlink, and read back as it was written; the first run's quick probe.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <string>

#include "core/error.h"
#include "planner/catalog.h"
#include "probe/probe.h"

using namespace strata;
namespace fs = std::filesystem;

namespace {
struct TempDir {
    fs::path path = fs::temp_directory_path() / ("strata-test-probe-" + std::to_string(::getpid()));
    TempDir() { fs::create_directories(path); }
    ~TempDir() { fs::remove_all(path); }
};
std::string read_all(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
planner::HardwareProfile catalog_profile() {
    planner::DryRunSpec spec;
    spec.dram = 16ull << 30;
    return planner::profile_from_catalog(spec);
}
}  // namespace

TEST_CASE("save_profile: a file is replaced whole, a symlink's target written, a FIFO written into and kept",
          "[unit][probe]") {
    const TempDir dir;
    const planner::HardwareProfile p = catalog_profile();
    const fs::path file = dir.path / "sub" / "hw.json";
    probe::save_profile(p, file);
    CHECK(probe::load_profile(file) == p);

    const fs::path link = dir.path / "link.json";
    fs::create_symlink(file, link);
    probe::save_profile(p, link);
    CHECK(fs::is_symlink(link));  // still the link, its target rewritten
    CHECK(probe::load_profile(file) == p);

    const fs::path fifo = dir.path / "fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    auto reader = std::async(std::launch::async, [&] { return read_all(fifo); });
    probe::save_profile(p, fifo);
    CHECK(reader.get() == p.to_json() + "\n");
    CHECK(fs::is_fifo(fifo));  // not replaced by a plain file

    CHECK_THROWS_AS(probe::save_profile(p, dir.path), UsageError);  // a folder
    // Nothing left behind where the profile could not be written.
    const fs::path locked = dir.path / "locked";
    fs::create_directories(locked);
    fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_exec);
    if (::access(locked.c_str(), W_OK) != 0) {  // root writes anyway
        CHECK_THROWS_AS(probe::save_profile(p, locked / "hw.json"), IoError);
        CHECK(fs::is_empty(locked));
    }
    fs::permissions(locked, fs::perms::owner_all);
}

TEST_CASE("a cached profile is used only when this build's probe measured it", "[unit][probe]") {
    planner::HardwareProfile p = catalog_profile();
    CHECK(p.probe_version == 0);  // a catalog's figures were never measured
    CHECK_FALSE(probe::cached_profile_current(p));
    p.probe_version = probe::kProbeVersion;
    CHECK(probe::cached_profile_current(p));
    // Kept through the cache's JSON; a profile from before the field, or from another version, is not current.
    CHECK(probe::cached_profile_current(planner::HardwareProfile::from_json(p.to_json())));
    p.probe_version = probe::kProbeVersion - 1;
    CHECK_FALSE(probe::cached_profile_current(planner::HardwareProfile::from_json(p.to_json())));
    std::string old = p.to_json();
    const size_t at = old.find("\"probe_version\"");
    REQUIRE(at != std::string::npos);
    old.replace(at, old.find(',', at) + 1 - at, "");
    CHECK(planner::HardwareProfile::from_json(old).probe_version == 0);
}

TEST_CASE("the first run's quick probe measures the CPU and the disk, not the simulated device, and is cached",
          "[unit][probe]") {
    const TempDir dir;
    const char* before = std::getenv("XDG_CACHE_HOME");
    const std::string kept = before ? before : "";
    ::setenv("XDG_CACHE_HOME", dir.path.c_str(), 1);
    std::string source;
    const planner::HardwareProfile p = probe::measured_profile(source, dir.path);
    std::string again_source;
    const planner::HardwareProfile again = probe::measured_profile(again_source);
    before ? ::setenv("XDG_CACHE_HOME", kept.c_str(), 1) : ::unsetenv("XDG_CACHE_HOME");

    CHECK(probe::cached_profile_current(p));
    CHECK_FALSE(p.cpu.rates.empty());
    CHECK(p.dram.kind == "measured");
    CHECK(p.nvme.path == dir.path.string());  // the model folder's drive, as given
    CHECK_FALSE(p.nvme.read_depth_curve.empty());
    CHECK_FALSE(p.sim.has_value());  // priced from the CPU's rates until `strata probe` measures it
    CHECK(source.find("now cached") != std::string::npos);
    CHECK(fs::exists(dir.path / "strata" / "hardware.json"));
    CHECK(again_source.find("the cached probe") != std::string::npos);
    CHECK(again == probe::load_profile(dir.path / "strata" / "hardware.json"));
    CHECK(again.cpu.rates.size() == p.cpu.rates.size());
}
