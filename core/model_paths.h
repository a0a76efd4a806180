#pragma once
// Where models live: $STRATA_MODELS, else $XDG_CACHE_HOME/strata/models, else
// ~/.cache/strata/models. The default model is SmolLM2-135M-Instruct (Q4_1).
#include <filesystem>

#include "core/cache_dir.h"

namespace strata {

inline constexpr const char* kDefaultModelFile = "SmolLM2-135M-Instruct.Q4_1.gguf";

std::filesystem::path models_dir();
std::filesystem::path default_model_path();
// The model to use when the user gave `given` (possibly empty): throws UsageError with the
// fetch command when the default model is absent.
std::filesystem::path resolve_model_path(const std::filesystem::path& given);

}  // namespace strata
