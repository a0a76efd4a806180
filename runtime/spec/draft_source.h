#pragma once
// What drafts for a model in an engine of its own (runtime/spec/draft_engine.h): a draft model's
// file, or the model's own first layers.
#include <filesystem>

namespace strata::runtime {

struct DraftSource {
    std::filesystem::path model;  // empty: the target's first layers (--spec self)
    bool early_layers() const { return model.empty(); }
};

}  // namespace strata::runtime
