#include "core/cache_dir.h"

#include <cstdlib>

namespace strata {

std::filesystem::path cache_dir() {
    auto env = [](const char* name) -> const char* {
        const char* v = std::getenv(name);
        return v && *v ? v : nullptr;
    };
    if (const char* xdg = env("XDG_CACHE_HOME")) return std::filesystem::path(xdg) / "strata";
    if (const char* home = env("HOME")) return std::filesystem::path(home) / ".cache" / "strata";
    return std::filesystem::path(".cache") / "strata";
}

}  // namespace strata
