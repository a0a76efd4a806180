#include "runtime/logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace strata::runtime {

SampledLogprobs token_logprobs(std::span<const float> logits, int32_t chosen, int n_top) {
    const float max_l = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (float l : logits) sum += std::exp(static_cast<double>(l - max_l));
    const double log_z = max_l + std::log(sum);
    SampledLogprobs out;
    out.chosen = {chosen, static_cast<float>(logits[chosen] - log_z)};
    const size_t n = std::min<size_t>(static_cast<size_t>(std::max(n_top, 0)), logits.size());
    std::vector<int32_t> ids(logits.size());
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(),
                      [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
    for (size_t i = 0; i < n; ++i) out.top.push_back({ids[i], static_cast<float>(logits[ids[i]] - log_z)});
    return out;
}

void ShownLogprobs::add(std::span<const SampledLogprobs> generated) { held_.insert(held_.end(), generated.begin(), generated.end()); }

std::vector<SampledLogprobs> ShownLogprobs::take(size_t text_bytes) {
    std::vector<SampledLogprobs> out;
    while (!held_.empty()) {
        const size_t bytes = piece_bytes_(held_.front().chosen.token);
        if (next_start_ > text_bytes || (next_start_ == text_bytes && bytes > 0)) break;
        next_start_ += bytes;
        out.push_back(std::move(held_.front()));
        held_.pop_front();
    }
    return out;
}

}  // namespace strata::runtime
