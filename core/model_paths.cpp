#include "core/model_paths.h"

#include <cstdlib>

#include <fmt/format.h>

#include "core/cache_dir.h"
#include "core/error.h"

namespace strata {

namespace {
const char* env(const char* name) {
    const char* v = std::getenv(name);
    return v && *v ? v : nullptr;
}
}  // namespace

std::filesystem::path models_dir() {
    if (const char* m = env("STRATA_MODELS")) return m;
    return cache_dir() / "models";
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
