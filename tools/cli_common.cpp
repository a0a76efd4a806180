#include <cstdlib>
#include <iostream>
#include <sstream>

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

std::string read_stdin() {
    std::stringstream ss;
    ss << std::cin.rdbuf();
    std::string s = ss.str();
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
}

}  // namespace strata::cli
