#pragma once
// `POST /v1/plan` (Strata's own endpoint): a JSON body naming the same choices as the flags of
// `strata plan` (field = flag without dashes, `-` as `_`), read into PlanOptions so that
// run_planner answers it exactly as the command does. The hardware must come from the
// catalog (a request never makes the server probe itself or read a profile file), and a
// GGUF model must be one the server lists, never a path the client chose.
#include <map>
#include <string>
#include <string_view>

#include "tools/cli_options.h"

namespace strata::cli {

// Local GGUF files a request may name: the name shown to clients -> the path.
using LocalModels = std::map<std::string, std::string>;

// The *.gguf files in the models directory (`strata plan --ui`; `strata serve` offers the models it serves).
LocalModels list_local_models();

// Throws openai::ApiError 400 naming the bad field; run_planner may still reject the
// combination (UsageError, OutOfBudget).
PlanOptions parse_plan_request(std::string_view body, const LocalModels& local);

}  // namespace strata::cli
