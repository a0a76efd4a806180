// Plan JSON loader (`--plan FILE`): Plan::from_json on arbitrary text must either throw
// UsageError or give a plan that survives to_json/from_json unchanged. A plan that matches
// one of the models here (check_matches) is then priced by the cost model, as the runtime
// does with a given plan.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "planner/catalog.h"
#include "planner/hardware_profile.h"
#include "planner/model_shape.h"
#include "planner/plan.h"
#include "planner/policy_search.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using namespace strata::planner;

std::vector<ModelShape> g_shapes;
std::vector<HardwareProfile> g_hw;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    strata::fuzz::quiet_logging();
    for (const auto& p : {strata::fuzz::bpe_model_path(), strata::fuzz::spm_model_path()})
        if (p) g_shapes.push_back(ModelShape::from_gguf(*p));
    g_shapes.push_back(ModelShape::from_catalog("llama3-8b", strata::DType::Q4_K));
    g_hw.push_back(profile_from_catalog(DryRunSpec{}));
    DryRunSpec gpu;
    gpu.gpu = "rtx4090";
    g_hw.push_back(profile_from_catalog(gpu));
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    Plan plan;
    try {
        plan = Plan::from_json(text);
    } catch (const strata::UsageError&) {
        return 0;
    }
    const std::string again = plan.to_json();
    try {
        if (Plan::from_json(again) != plan) {
            std::fprintf(stderr, "plan changed through to_json/from_json:\n%s\n", again.c_str());
            std::abort();
        }
    } catch (const strata::UsageError& e) {
        std::fprintf(stderr, "a loaded plan's to_json is refused: %s\n%s\n", e.what(), again.c_str());
        std::abort();
    }
    for (const auto& shape : g_shapes) {
        try {
            plan.check_matches(shape);
        } catch (const strata::UsageError&) {
            continue;
        }
        Workload wl;
        wl.prompt_len = 256, wl.gen_len = 64;
        for (const auto& hw : g_hw) {
            try {
                (void)evaluate_plan(shape, hw, wl, plan);
            } catch (const strata::UsageError&) {
            }
        }
    }
    return 0;
}
