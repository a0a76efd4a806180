#include "cpu/attention_cpu.h"

#include <cmath>
#include <vector>

#include <oneapi/tbb/enumerable_thread_specific.h>
#include <oneapi/tbb/parallel_for.h>

#include "cpu/norm_rope_act.h"

namespace strata::cpu {

void attention(const AttentionArgs& a) {
    const int32_t group = a.n_head / a.n_head_kv;
    const float scale = 1.0f / std::sqrt(static_cast<float>(a.head_dim));
    const int64_t q_stride = static_cast<int64_t>(a.n_head) * a.head_dim;
    tbb::enumerable_thread_specific<std::vector<float>> scratch;

    tbb::parallel_for(int64_t{0}, a.n_tokens * a.n_head, [&](int64_t task) {
        const int64_t t = task / a.n_head;
        const int32_t h = static_cast<int32_t>(task % a.n_head);
        const int64_t n_kv = a.pos0 + t + 1;
        const float* q = a.q + t * q_stride + static_cast<int64_t>(h) * a.head_dim;
        const int64_t kv_off = static_cast<int64_t>(h / group) * a.head_dim;

        auto& scores = scratch.local();
        scores.resize(n_kv);
        for (int64_t j = 0; j < n_kv; ++j) {
            const float* k = a.k + j * a.kv_stride + kv_off;
            float s = 0;
            for (int32_t d = 0; d < a.head_dim; ++d) s += q[d] * k[d];
            scores[j] = s * scale;
        }
        softmax(scores.data(), n_kv);
        float* out = a.out + t * q_stride + static_cast<int64_t>(h) * a.head_dim;
        for (int32_t d = 0; d < a.head_dim; ++d) out[d] = 0;
        for (int64_t j = 0; j < n_kv; ++j) {
            const float* v = a.v + j * a.kv_stride + kv_off;
            const float w = scores[j];
            for (int32_t d = 0; d < a.head_dim; ++d) out[d] += w * v[d];
        }
    });
}

}  // namespace strata::cpu
