#include "core/log.h"

#include <cstdio>
#include <cstdlib>

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
    if (const char* env = std::getenv("STRATA_LOG")) level = spdlog::level::from_str(env);
    if (verbosity == 1) level = spdlog::level::info;
    if (verbosity >= 2) level = spdlog::level::debug;
    spdlog::set_level(level);
}

void assert_fail(const char* cond, const char* file, int line) {
    std::fprintf(stderr, "strata: internal error: assertion '%s' failed at %s:%d\n", cond, file, line);
    std::abort();
}

}  // namespace strata
