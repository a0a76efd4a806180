#pragma once
// Catalog hardware descriptions for the planner tests.
#include <string>

#include "planner/catalog.h"

namespace strata::test {

inline planner::DryRunSpec gpu_spec(const char* gpu, uint64_t dram = 0) {
    planner::DryRunSpec s;
    s.gpu = gpu;
    if (dram) s.dram = dram;
    return s;
}

inline planner::DryRunSpec system_spec(const std::string& name) {
    planner::DryRunSpec s;
    s.system = name;
    return s;
}

}  // namespace strata::test
