#pragma once
// Engine options for tests: a model file and a context size, every other option at its default.
#include <filesystem>

#include "runtime/engine.h"

namespace strata::test {

inline runtime::EngineOptions engine_options(const std::filesystem::path& model, int n_ctx) {
    runtime::EngineOptions o;
    o.model = model;
    o.n_ctx = n_ctx;
    return o;
}

}  // namespace strata::test
