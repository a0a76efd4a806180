// The CUDA backend on the real SmolLM2 model against the CPU backend: teacher-forced top-1
// agreement of the logits, and the same greedy tokens whether the layers are all on the
// device, half copied in each pass, or attention runs on the CPU. Label `gpu`: they skip
// without a CUDA GPU.
#include <catch2/catch.hpp>

#include <algorithm>

#include "planner/plan.h"
#include "runtime/engine.h"
#include "runtime/exec/cuda_backend.h"
#include "runtime/place/placement.h"
#include "runtime/weights/weight_store.h"
#include "tests/support/greedy.h"
#include "tests/support/model_paths.h"
#include "tests/unit/gpu/cuda_test_support.h"

using namespace strata;
using namespace strata::runtime;

namespace {

EngineOptions options(const std::filesystem::path& model, std::optional<uint64_t> gpu_mem, AttentionChoice attention) {
    EngineOptions eo;
    eo.model = model;
    eo.n_ctx = 512;
    eo.gpu.gpu_mem = gpu_mem;
    eo.gpu.attention = attention;
    return eo;
}

int argmax(std::span<const float> row) { return int(std::max_element(row.begin(), row.end()) - row.begin()); }

const char* const kText =
    "The history of the river town begins with a ferry crossing, a mill and a road that followed the water "
    "north. Over two centuries the mill became a factory, the ferry a bridge, and the road a railway line "
    "that carried grain, timber and later machines to the cities on the coast.";

}  // namespace

TEST_CASE("cuda backend: teacher-forced top-1 agrees with the CPU on 99% of positions", "[gpu][model]") {
    STRATA_REQUIRE_CUDA_GPU();
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    Engine cpu(options(*path, 0, AttentionChoice::Auto));
    Engine gpu(options(*path, std::nullopt, AttentionChoice::Gpu));
    REQUIRE(cpu.backend_name() == "cpu");
    REQUIRE(gpu.backend_name() == "cuda");
    const auto tokens = cpu.tokenizer().encode(kText, true, false);
    const int64_t V = cpu.hparams().n_vocab;
    const auto cpu_logits = cpu.eval(tokens, true);
    const std::vector<float> ref(cpu_logits.begin(), cpu_logits.end());
    const auto got = gpu.eval(tokens, true);
    int agree = 0;
    for (size_t t = 0; t < tokens.size(); ++t)
        agree += argmax(std::span(ref).subspan(t * V, V)) == argmax(got.subspan(t * V, V));
    INFO(agree << " of " << tokens.size() << " positions agree");
    CHECK(agree >= 0.99 * double(tokens.size()));
}

TEST_CASE("cuda backend: resident, streamed and CPU-attention runs give the same tokens", "[gpu][model]") {
    STRATA_REQUIRE_CUDA_GPU();
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    Engine resident(options(*path, std::nullopt, AttentionChoice::Gpu));
    const auto prompt = resident.tokenizer().encode(kText, true, false);
    auto run = [&](Engine& e) { return e.generate(prompt, test::greedy(32, true)).tokens; };
    const auto expected = run(resident);
    // Room for the working set and about half the layers: the rest are copied in each pass.
    const uint64_t weights = resident.weights().weights().total_bytes();
    Engine streamed(options(*path, CudaBackend::working_bytes(resident.hparams(), weights / 8, weights / 16, 2, 512) + weights / 2,
                            AttentionChoice::Gpu));
    Engine cpu_attention(options(*path, std::nullopt, AttentionChoice::Cpu));
    const auto& on_device = streamed.placement().residency.on_device;
    CHECK(std::count(on_device.begin(), on_device.end(), false) > 0);
    CHECK(run(streamed) == expected);
    CHECK(run(cpu_attention) == expected);
}

TEST_CASE("cuda backend: KV recomputed on the device from saved hidden states gives the same tokens", "[gpu][model]") {
    STRATA_REQUIRE_CUDA_GPU();
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    EngineOptions o = options(*path, std::nullopt, AttentionChoice::Gpu);
    o.kv_type = DType::F32;  // hidden states and K/V kept exactly: only the matmuls' rounding differs
    std::optional<planner::Plan> made;
    o.on_plan = [&](const Placement& p) { made = p.plan; };
    Engine stored(o);
    REQUIRE(made);
    // Longer than one pass, so that the second pass attends to rebuilt positions too.
    std::vector<int32_t> prompt;
    while (prompt.size() < 300) {
        const auto more = stored.tokenizer().encode(kText, prompt.empty(), false);
        prompt.insert(prompt.end(), more.begin(), more.end());
    }
    const auto expected = stored.generate(prompt, test::greedy(32, true)).tokens;
    planner::Plan recompute = *made;
    recompute.policy.recompute = true;
    for (auto& l : recompute.layers)
        if (l.layer % 2 == 1) l.kv = planner::KvOption::ActGpu;
    o.plan = recompute;
    o.on_plan = {};
    Engine rebuilt(o);
    REQUIRE(rebuilt.kv_cache().n_rebuilt() == rebuilt.hparams().n_layer / 2);
    CHECK(rebuilt.generate(prompt, test::greedy(32, true)).tokens == expected);
}
