#pragma once
// A resident layer given back as the model file lays it out, from the memory the CPU computes
// it from: its tiled matrices untiled (cpu::untile_weights), the rest copied. Op offload copies
// the CPU's layers to a device this way instead of reading them from the file again.
#include <cstddef>
#include <functional>

#include "runtime/weights/model_weights.h"

namespace strata::runtime {

// Whether every matrix of `layer`, tiled now or later (WeightStore::tile_for_cpu), comes back
// in the file's layout (cpu::can_untile).
bool file_layout_from_memory(const LayerWeights& layer);

// Each tensor of `layer` into dst + offset_in_layer(tensor), as its bytes lie in the file, in the
// file's order; after each matrix, written(n): every tensor below n is written (so a copy of
// those bytes can start while the rest are rebuilt). Requires file_layout_from_memory(layer).
// Splits each tensor's untiling or copy over the current cpu::ThreadPool.
void write_file_layout(const LayerWeights& layer, const std::function<uint64_t(const WeightRef&)>& offset_in_layer,
                       std::byte* dst, const std::function<void(uint64_t)>& written = {});

}  // namespace strata::runtime
