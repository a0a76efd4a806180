#pragma once
// One spdlog sink on stderr; results go to stdout, logs and progress to stderr.
#include <spdlog/spdlog.h>

namespace strata {
// Level from the STRATA_LOG environment variable (trace..off) unless `verbosity` > 0 (-v, -vv).
void init_logging(int verbosity = 0);
}  // namespace strata

#define STRATA_LOG_DEBUG(...) spdlog::debug(__VA_ARGS__)  // at -vv (SPDLOG_DEBUG compiles out of a release build)
#define STRATA_LOG_INFO(...) spdlog::info(__VA_ARGS__)
#define STRATA_LOG_WARN(...) spdlog::warn(__VA_ARGS__)
#define STRATA_LOG_ERROR(...) spdlog::error(__VA_ARGS__)
