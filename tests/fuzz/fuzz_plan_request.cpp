// `POST /v1/plan` bodies (`strata serve`, `strata plan --ui`): parse_plan_request on arbitrary
// text, then the planner on what it accepts, as the endpoint runs them. Each input must end
// in a 4xx ApiError, a UsageError or OutOfBudget (the answers the endpoint turns into 400 and
// 422), or a plan with finite, positive predictions that survives to_json/from_json unchanged.
// The one local model offered is the BPE test model, when present.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "core/error.h"
#include "tests/fuzz/fuzz_support.h"
#include "tools/openai/api_error.h"
#include "tools/plan/plan_inputs.h"
#include "tools/plan/plan_request.h"

namespace {
strata::cli::LocalModels g_local;
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    strata::fuzz::quiet_logging();
    if (const auto path = strata::fuzz::bpe_model_path()) g_local["model.gguf"] = path->string();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view body(reinterpret_cast<const char*>(data), size);
    try {
        const strata::cli::PlanOptions options = strata::cli::parse_plan_request(body, g_local).options;
        const strata::cli::PlanRun run = strata::cli::run_planner(options, strata::cli::catalog_hardware(options));
        const auto& p = run.result.best.prediction;
        if (!std::isfinite(p.ttft_s) || !(p.ttft_s > 0) || !std::isfinite(p.decode_tps_per_seq) || !(p.decode_tps_per_seq > 0)) {
            std::fprintf(stderr, "a plan with prediction ttft %g s, %g tok/s\n", p.ttft_s, p.decode_tps_per_seq);
            std::abort();
        }
        const std::string json = run.result.best.to_json();
        if (strata::planner::Plan::from_json(json).to_json() != json) {
            std::fprintf(stderr, "the plan does not survive to_json/from_json\n");
            std::abort();
        }
    } catch (const strata::openai::ApiError& e) {
        if (e.status() < 400 || e.status() >= 500) std::abort();
    } catch (const strata::UsageError&) {
    } catch (const strata::OutOfBudget&) {
    }
    return 0;
}
