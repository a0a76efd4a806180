#include "core/log.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <spdlog/sinks/stdout_color_sinks.h>

#include "core/error.h"

namespace strata {

void init_logging(int verbosity) {
    static bool done = false;
    if (!done) {
        auto logger = spdlog::stderr_color_mt("strata");
        logger->set_pattern("%^%l%$ %v");
        spdlog::set_default_logger(logger);
        done = true;
    }
    auto level = spdlog::level::warn;
    if (const char* env = std::getenv("STRATA_LOG"); env && *env) {
        std::string name(env);
        std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
        // from_str gives `off` for a name it does not know: warnings would vanish over a typo.
        if (const auto named = spdlog::level::from_str(name); named != spdlog::level::off || name == "off") level = named;
        else std::fprintf(stderr, "strata: warning: STRATA_LOG='%s' is not a level (trace, debug, info, warn, error, critical, off); "
                                  "logging warnings\n", env);
    }
    if (verbosity == 1) level = spdlog::level::info;
    if (verbosity >= 2) level = spdlog::level::debug;
    spdlog::set_level(level);
}

void assert_fail(const char* cond, const char* file, int line) {
    std::fprintf(stderr, "strata: internal error: assertion '%s' failed at %s:%d\n", cond, file, line);
    std::abort();
}

}  // namespace strata
