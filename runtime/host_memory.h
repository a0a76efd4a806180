#pragma once
// What a run holds in DRAM, as the engine counts it before anything is read: the
// forward pass's working memory, and the least --dram a plan runs in on a model file. `strata
// plan` asks the second so that a plan it makes for a --dram runs there.
#include <cstdint>

#include "core/dtype.h"

namespace strata::models { class GgufFile; struct Hparams; }
namespace strata::planner { struct Plan; }

namespace strata::runtime {

// The rows of logits a run holds from the start: its batch's sequences and one sequence's drafts
// (a decode pass of decode_rows rows).
inline int planned_logit_rows(int n_batch, int decode_rows) { return n_batch + decode_rows - 1; }
// The logits of a decode pass's rows beyond its first (the batch's other sequences, a speculative
// pass's drafts): a row each, and the pass's copy.
uint64_t batch_logits_bytes(const models::Hparams& hp, int pass_rows);
// What the CPU's forward pass holds besides weights and the KV cache: activations, one row of
// logits, and the other rows'.
uint64_t host_activation_bytes(const models::Hparams& hp, int pass_rows);

// The run a plan is checked for: n_batch sequences of n_ctx positions each, a sequence's decode
// pass of decode_rows rows (Engine: the batch's rows and one sequence's drafts).
struct HostRun {
    int n_ctx = 0;
    int n_batch = 1;
    DType kv_type = DType::F16;
    int prefetch_depth = 2;  // EngineOptions's default
    int decode_rows = 1;
};
// The least --dram `plan` runs in on `file`: its weights as it holds them, the working memory
// (with a device, the device backend's host buffers too), and the KV cache with every layer
// spilled (the engine keeps more of it in DRAM when the budget has room), or, where the device
// holds the cache, the KV of the layers the plan leaves to the CPU. Throws UsageError for a plan
// this runtime cannot run (a mixture of experts placed on a device).
uint64_t least_dram_for_plan(const models::GgufFile& file, const planner::Plan& plan, const HostRun& run);

}  // namespace strata::runtime
