#include "tests/fuzz/fuzz_support.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include <spdlog/spdlog.h>

#include "core/model_paths.h"

namespace strata::fuzz {

namespace {
std::optional<std::filesystem::path> existing(const char* env, const std::filesystem::path& fallback) {
    const char* v = std::getenv(env);
    std::filesystem::path p = v && *v ? std::filesystem::path(v) : fallback;
    return std::filesystem::exists(p) ? std::optional(p) : std::nullopt;
}
}  // namespace

void quiet_logging() { spdlog::set_level(spdlog::level::off); }

std::optional<std::filesystem::path> bpe_model_path() { return existing("STRATA_FUZZ_MODEL", strata::default_model_path()); }

std::optional<std::filesystem::path> spm_model_path() {
    return existing("STRATA_FUZZ_SPM_MODEL",
                    std::filesystem::path(STRATA_SOURCE_DIR) / ".." / "shared" / "models" / "stories260K.gguf");
}

const std::filesystem::path& write_scratch(const uint8_t* data, size_t size) {
    static const std::filesystem::path path = "/dev/shm/strata-fuzz-" + std::to_string(::getpid()) + ".bin";
    static const bool cleanup = [] { return std::atexit([] { std::filesystem::remove(path); }) == 0; }();
    (void)cleanup;
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    return path;
}

}  // namespace strata::fuzz
