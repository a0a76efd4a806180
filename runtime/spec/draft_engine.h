#pragma once
// The engine a drafter runs beside its target: a draft model's (--draft-model) or the target's
// own first layers (--spec self), with a context as long as the target's, room for a draft
// sequence per target sequence, every layer in memory on the CPU. Under a DRAM budget it is held
// within the target's: the target is planned around what it takes (EngineOptions::dram_beside,
// sized by draft_engine_options before the target loads) and reserves it, and the drafting
// engine runs within exactly that.
#include <filesystem>
#include <memory>

#include "runtime/engine.h"

namespace strata::runtime {

// What drafts: a model file of its own, or (empty) the target's first layers.
struct DraftSource {
    std::filesystem::path model;
    bool early_layers() const { return model.empty(); }
};

// The drafting engine's options beside a target of `target` options, before the target loads
// (to size its share of the budget: Engine::extent(...).resident_dram).
EngineOptions draft_engine_options(const EngineOptions& target, const DraftSource& source);
// The same beside a loaded target, within the share it holds (Engine::dram_beside; none: no limit).
EngineOptions draft_engine_options(const Engine& target, const DraftSource& source);
// `target` with the share of its DRAM budget a drafting engine of `source` takes (none without a
// budget: both are then unlimited).
EngineOptions with_draft_share(EngineOptions target, const DraftSource& source);

}  // namespace strata::runtime
