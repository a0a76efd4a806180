#pragma once
// An embedding request's prompt is read in chunks: its hidden states are pooled chunk by chunk
// and, once the prompt is read, scaled to unit length (the scheduler's embedding jobs).
#include <cmath>
#include <span>
#include <vector>

#include "runtime/engine.h"

namespace strata::runtime {

// Adds one chunk's pass output to `pooled`: the chunk's sum (Mean), its last row (Last) or,
// for the first chunk, its first row (First).
inline void pool_chunk(std::vector<float>& pooled, Pooling how, bool first_chunk, std::span<const float> hidden) {
    if (pooled.empty()) pooled.assign(hidden.size(), 0.0f);
    if (how == Pooling::Mean)
        for (size_t c = 0; c < hidden.size(); ++c) pooled[c] += hidden[c];
    else if (how == Pooling::Last || first_chunk)
        pooled.assign(hidden.begin(), hidden.end());
}

// `v` scaled to unit length (a mean's division cancels here); zeros stay zeros.
inline std::vector<float> unit_length(std::span<const float> v) {
    double norm = 0;
    for (float x : v) norm += double(x) * x;
    const double scale = norm > 0 ? 1.0 / std::sqrt(norm) : 0.0;
    std::vector<float> out(v.size());
    for (size_t c = 0; c < v.size(); ++c) out[c] = static_cast<float>(v[c] * scale);
    return out;
}

}  // namespace strata::runtime
