#include "tests/support/model_paths.h"

#include "core/model_paths.h"

namespace strata::test {

std::optional<std::filesystem::path> default_model_path() {
    auto p = strata::default_model_path();
    return std::filesystem::exists(p) ? std::optional(p) : std::nullopt;
}

std::optional<std::filesystem::path> stories260k_path() {
    auto p = std::filesystem::path(STRATA_SOURCE_DIR) / ".." / "shared" / "models" / "stories260K.gguf";
    return std::filesystem::exists(p) ? std::optional(p.lexically_normal()) : std::nullopt;
}

std::filesystem::path strata_binary() { return std::filesystem::path(STRATA_BINARY_DIR) / "strata"; }

}  // namespace strata::test
