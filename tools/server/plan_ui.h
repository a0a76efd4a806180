#pragma once
// `strata plan --ui`: the planner page and its endpoints without a model, on localhost by default.
#include <string>

namespace strata::server {

// Serves until interrupted; throws IoError when the address cannot be bound.
int run_plan_ui(const std::string& host, int port);

}  // namespace strata::server
