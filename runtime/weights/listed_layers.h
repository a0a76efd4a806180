#pragma once
// The layers of the architectures whose tensors models/arch_tensors lists (deepseek2, gpt-oss),
// bound by that list: each tensor of a layer's list to its LayerWeights view, in the list's
// shape. ModelWeights::bind checks the file against the list first (models::check_tensors).
#include <vector>

#include "models/hparams.h"
#include "runtime/weights/model_weights.h"

namespace strata::runtime {

// Throws FormatError for a deepseek2 file from an older conversion (attn_kv_b), whose latent
// attention is not run in its absorbed form.
void bind_listed_layers(const models::GgufFile& f, const models::Hparams& hp, std::vector<LayerWeights>& layers);

}  // namespace strata::runtime
