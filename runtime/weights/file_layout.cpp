#include "runtime/weights/file_layout.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "core/error.h"
#include "cpu/quant.h"
#include "cpu/thread_pool.h"

namespace strata::runtime {

bool file_layout_from_memory(const LayerWeights& layer) {
    for (auto m : LayerWeights::kAll)
        if (const WeightRef& w = layer.*m; w && w.n_rows > 1 && !cpu::can_untile(w.type, w.n_cols)) return false;
    return true;
}

void write_file_layout(const LayerWeights& layer, const std::function<uint64_t(const WeightRef&)>& offset_in_layer,
                       std::byte* dst, const std::function<void(uint64_t)>& written) {
    std::vector<std::pair<uint64_t, const WeightRef*>> in_order;
    for (auto m : LayerWeights::kAll)
        if (const WeightRef& w = layer.*m) in_order.emplace_back(offset_in_layer(w), &w);
    std::sort(in_order.begin(), in_order.end());
    uint64_t end = 0;
    for (const auto& [at, w] : in_order) {
        std::byte* to = dst + at;
        end = std::max(end, at + w->bytes());
        if (!w->tiled) cpu::parallel_copy(to, w->data, w->bytes());
        for (int64_t e = 0; w->tiled && e < w->n_mats; ++e) {
            const bool untiled = cpu::untile_weights(w->type, w->mat(e).data, to + e * w->mat_bytes(), w->n_rows, w->n_cols);
            STRATA_ASSERT(untiled && "file_layout_from_memory said it could");
        }
        if (written && w->n_rows > 1) written(end);  // a vector rides with the next matrix's copy
    }
}

}  // namespace strata::runtime
