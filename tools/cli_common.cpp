#include <cstdlib>

#include "storage/budget.h"
#include "tools/cli_options.h"

namespace strata::cli {

EngineOptions ModelOptions::engine() const {
    EngineOptions e;
    e.model = model;
    e.n_threads = threads;
    e.n_ctx = ctx;
    e.prefetch_depth = prefetch;
    std::string budget = dram;
    if (budget.empty())
        if (const char* env = std::getenv("STRATA_DRAM")) budget = env;
    if (!budget.empty()) e.dram_budget = storage::parse_memory_size(budget);
    return e;
}

}  // namespace strata::cli
