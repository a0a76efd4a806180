#pragma once
// `POST /v1/plan` (Strata's own endpoint): a JSON body naming the same choices as the flags of
// `strata plan` (field = flag without dashes, `-` as `_`), read into PlanOptions so that
// run_planner answers it exactly as the command does. The hardware comes from the catalog,
// or with "hw": "machine" from what `strata plan --ui` was started for (a request never names
// a profile file; `strata serve` refuses it), and a GGUF model must be one the server lists,
// never a path the client chose. "output" asks for the plan (default), the frontier or the
// decode-step SVG.
#include <map>
#include <string>
#include <string_view>

#include "tools/cli_options.h"

namespace strata::cli {

// Local GGUF files a request may name: the name shown to clients -> the path.
using LocalModels = std::map<std::string, std::string>;

// The *.gguf files in the models directory (`strata plan --ui`; `strata serve` offers the models it serves).
LocalModels list_local_models();

// What `strata plan` prints: the plan (--json), the policies no other beats (--frontier), one
// pipelined decode step drawn (--svg).
enum class PlanOutput { Plan, Frontier, Svg };

struct PlanRequest {
    PlanOptions options;
    PlanOutput output = PlanOutput::Plan;
    bool machine = false;  // "hw": "machine": the hardware `strata plan --ui` plans for
};

// Throws openai::ApiError 400 naming the bad field; run_planner may still reject the
// combination (UsageError, OutOfBudget).
PlanRequest parse_plan_request(std::string_view body, const LocalModels& local);

}  // namespace strata::cli
