#pragma once
// One layer's attention for a pass, on the CPU over the paged KV cache (the CPU backend, and
// the CUDA backend's CPU-attention mode): every segment's query rows against its sequence's
// keys and values, which the pass has already stored (a draft tree's rows through its mask); in the layer's sliding window where it
// has one, with the architecture's score scale, soft cap and sinks (the layer program's AttentionSpec).
#include <span>

#include "runtime/exec/backend.h"
#include "runtime/exec/layer_program.h"
#include "runtime/kv/kv_cache.h"

namespace strata::runtime {

// q and out: the pass's rows of n_head query heads and as many value heads; sinks: the layer's
// AttentionSpec::sinks, or null; drafts: the pass's draft trees (PassLayout::drafts), which
// segments name. The caller runs it inside the thread pool.
void attend_on_cpu(const AttentionSpec& spec, KvCache& kv, int il, std::span<const PassLayout::Segment> segments,
                   const float* q, float* out, const float* sinks, std::span<const DraftRows> drafts = {});

}  // namespace strata::runtime
