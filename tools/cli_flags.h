#pragma once
// The flags commands share, and the validators their values go through: each command adds its own
// flags first, then these groups, so that its help lists its own first.
#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "runtime/reasoning_budget.h"
#include "runtime/sampler.h"
#include "tools/cli_options.h"

namespace strata::cli {

// A whole number of at least `lo` that an int holds (every such flag is one). (CLI11's own range
// checks print their bound as a 309-digit number and do not say what to give.)
CLI::Validator at_least(int64_t lo);
// A path given empty (`-m "$MODEL"` with the variable unset) is a mistake, not the default model.
CLI::Validator non_empty_path();
// A finite number above 0 (a rate, a target): 0, negatives and nan would silently mean "not given".
CLI::Validator positive_number();

// -m/--model and -v/--verbose.
void add_model_option(CLI::App& cmd, ModelOptions& m);
// The engine's, memory's and devices' flags; the speculative decoding flags where the command
// generates.
void add_engine_options(CLI::App& cmd, ModelOptions& m, bool generates = true);
// --plan-prompt, for the commands whose prompts arrive after the plan is made (chat, serve);
// `by_default` says what they plan for without it.
void add_plan_prompt_option(CLI::App& cmd, ModelOptions& m, const std::string& by_default);
// Temperature, top-k/p, min-p, penalties and the seed.
void add_sampler_options(CLI::App& cmd, runtime::SamplerParams& s, std::optional<uint64_t>& seed);
// --chat-template FAMILY.
void add_chat_template_option(CLI::App& cmd, std::string& family);
// --reasoning-budget N and --reasoning-budget-message TEXT (the style is the template's, later).
void add_reasoning_budget_options(CLI::App& cmd, runtime::ReasoningBudgetParams& budget);

}  // namespace strata::cli
