#pragma once
// Running an engine the way every command does, through the scheduler, for tests that compare
// tokens or logits of two runs.
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/engine.h"
#include "runtime/generation.h"
#include "runtime/spec/speculation.h"

namespace strata::test {

// `prompt` generated from an empty sequence with `params`, alone in a scheduler speculating as
// `spec` says (by default as every command does).
runtime::GenerateResult generate(runtime::Engine& engine, std::span<const int32_t> prompt, const runtime::GenerateParams& params,
                                 const runtime::SpecOptions& spec = {});
// The n_vocab logits of every token of `tokens` from an empty sequence (a scoring request).
std::vector<float> prompt_logits(runtime::Engine& engine, std::span<const int32_t> tokens);

}  // namespace strata::test
