#include "runtime/spec/draft_engine.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/model_paths.h"
#include "models/gguf_file.h"
#include "models/hparams.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/spec/self_drafter.h"

namespace strata::runtime {

namespace {

// A drafting engine's options: the model (the target's own file cut to its first layers where
// `n_layers` > 0), the target's context and KV positions, on the CPU, no prefix spill of its own.
EngineOptions draft_options(std::filesystem::path model, int n_layers, int n_threads, int n_ctx, int kv_positions) {
    EngineOptions e;
    e.model = std::move(model);
    e.n_layers = n_layers;
    e.n_threads = n_threads;
    e.n_ctx = n_ctx;
    e.kv_positions = kv_positions;  // a draft sequence per target sequence
    e.gpu.device = DeviceKind::Cpu;
    e.prefix_spill_bytes = 0;  // a draft's evicted prefix is cheap to compute again
    return e;
}

}  // namespace

EngineOptions draft_engine_options(const EngineOptions& target, const DraftSource& source) {
    const Engine::Extent at = Engine::extent(target);
    if (!source.early_layers()) return draft_options(source.model, 0, target.n_threads, at.n_ctx, at.kv_positions);
    const std::filesystem::path file = resolve_model_path(target.model);
    const int32_t n_layer = models::Hparams::from_gguf(models::GgufFile::open(file)).n_layer;
    return draft_options(file, exit_candidates(n_layer).back(), target.n_threads, at.n_ctx, at.kv_positions);
}

EngineOptions draft_engine_options(const Engine& target, const DraftSource& source) {
    const int kv_positions = target.kv_cache().pool().n_blocks() * KvCache::kBlockSize;
    EngineOptions e = source.early_layers()
                          ? draft_options(target.file().path(), exit_candidates(target.hparams().n_layer).back(),
                                          target.n_threads(), target.n_ctx(), kv_positions)
                          : draft_options(source.model, 0, target.n_threads(), target.n_ctx(), kv_positions);
    e.dram_budget = target.dram_beside();
    return e;
}

uint64_t draft_share(const EngineOptions& target, const DraftSource& source) {
    try {
        return Engine::extent(draft_engine_options(target, source)).resident_dram;
    } catch (const Error& e) {
        if (source.early_layers()) throw;
        // The file's own errors (missing, not GGUF) name the model's remedies: these are the draft model's.
        throw UsageError(fmt::format("the draft model {}: {}", source.model.string(), e.what()),
                         "give a GGUF model with the target's vocabulary, or leave --draft-model out");
    }
}

}  // namespace strata::runtime
