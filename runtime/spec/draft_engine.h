#pragma once
// The engine a drafter runs beside its target: a draft model's (--draft-model) or the target's
// own first layers (--spec self), with a context as long as the target's, room for a draft
// sequence per target sequence, every layer in memory on the CPU. Under a DRAM budget it is held
// within the target's: the target, given it (EngineOptions::draft), plans around its share
// (draft_share, from the target's own options) and reserves it, and the drafting engine runs
// within exactly that (Engine::dram_beside).
#include <cstdint>

#include "runtime/engine.h"
#include "runtime/spec/draft_source.h"

namespace strata::runtime {

// The drafting engine's options beside a target of `target` options, before the target loads.
EngineOptions draft_engine_options(const EngineOptions& target, const DraftSource& source);
// The same beside a loaded target, within the share it holds (Engine::dram_beside; none: no limit).
EngineOptions draft_engine_options(const Engine& target, const DraftSource& source);
// The DRAM the drafting engine beside a target of `target` options takes (Engine::extent's
// resident_dram). Throws UsageError naming the draft model where its file cannot be read.
uint64_t draft_share(const EngineOptions& target, const DraftSource& source);

}  // namespace strata::runtime
