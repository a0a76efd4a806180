#include "runtime/model_paths.h"

#include <cstdlib>

#include <fmt/format.h>

#include "runtime/core/error.h"

namespace strata {

std::filesystem::path models_dir() {
    auto env = [](const char* name) -> const char* {
        const char* v = std::getenv(name);
        return v && *v ? v : nullptr;
    };
    if (const char* m = env("STRATA_MODELS")) return m;
    if (const char* xdg = env("XDG_CACHE_HOME")) return std::filesystem::path(xdg) / "strata" / "models";
    if (const char* home = env("HOME")) return std::filesystem::path(home) / ".cache" / "strata" / "models";
    return std::filesystem::path(".cache") / "strata" / "models";
}

std::filesystem::path default_model_path() { return models_dir() / kDefaultModelFile; }

std::filesystem::path resolve_model_path(const std::filesystem::path& given) {
    if (!given.empty()) return given;
    auto p = default_model_path();
    if (!std::filesystem::exists(p))
        throw UsageError(fmt::format("the default model is not at {}", p.string()),
                         "run scripts/fetch_model.sh to download it, or pass -m MODEL.gguf");
    return p;
}

}  // namespace strata
