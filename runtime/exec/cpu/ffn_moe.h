#pragma once
// A mixture-of-experts feed-forward on the CPU (qwen3moe, mixtral): the router's logits for
// every row of the pass, its top n_expert_used experts per row (softmax or sigmoid
// probabilities, normalised and scaled as the model says), then the rows grouped by expert so
// that each chosen expert's matrices are read once per pass for all the rows routed to it
// (a prompt and a batch of decode steps alike), through the same matmul kernels as a dense
// layer; shared experts, where the model has them, see every row. A row's result does not
// depend on the other rows of the pass: each expert adds its share to a row in expert order,
// and float weights run a long segment's rows apart from the others' (PassMatmul). Layers
// whose experts are offloaded take them from the expert cache (runtime/weights/expert_cache.h),
// whose reads start once the router has chosen and overlap the shared experts and the held ones;
// experts held on a device (RemoteExperts) are started first and computed there meanwhile.
#include <cstdint>
#include <span>
#include <vector>

#include "models/hparams.h"
#include "runtime/exec/backend.h"
#include "runtime/exec/cpu/pass_matmul.h"
#include "runtime/exec/cpu/ffn_dense.h"
#include "runtime/exec/remote_experts.h"
#include "runtime/exec/routing_stats.h"
#include "runtime/weights/expert_cache.h"
#include "runtime/weights/model_weights.h"

namespace strata::runtime {

// Expert e of a layer's mixture as a gated feed-forward, with its biases (gpt-oss).
GatedFfn expert_ffn(const LayerWeights& l, int e);

class MoeFfn {
public:
    explicit MoeFfn(const models::Hparams& hp) : hp_(hp) {}
    // Where the experts of offloaded layers come from (null: none are).
    void set_expert_cache(ExpertCache* cache) { cache_ = cache; }
    // Where the experts held on a device are computed (null: none are).
    void set_remote_experts(RemoteExperts* remote) { remote_ = remote; }

    // Sizes the scratch for passes of up to n rows.
    void reserve(int64_t n);
    // Floats of scratch a pass of n rows holds.
    static uint64_t scratch_floats(const models::Hparams& hp, int64_t n);
    // out (the pass's n rows of n_embd) = layer il's experts applied to xn; counts the routing
    // in `stats`. Runs on the thread pool (call inside its arena).
    void run(int il, const LayerWeights& l, const PassMatmul& mm, const PassLayout& p, const float* xn, float* out,
             RoutingStats& stats);

private:
    // One row's router logits (biased where the model has a bias) -> its experts, best first,
    // and their weights: softmax or sigmoid scores, ranked with the selection bias and within
    // the best groups where the model has them, normalised and scaled as it says; or (gpt-oss)
    // the best logits, weighted by their softmax.
    void choose(const LayerWeights& l, float* logit, int32_t* sel, float* weight) const;
    // Grouped routing: every expert outside the n_group_used groups whose two best ranks sum
    // highest ranked last.
    void keep_best_groups(float* rank) const;
    // chosen_ and weight_: each row's experts, best first, and their weights.
    void route(const LayerWeights& l, const PassMatmul& mm, const PassLayout& p, const float* xn);
    // rows_ of expert e's group (ascending, so long segments' rows come first) gathered into x_,
    // and `ffn(i0, i1, n_long)` over rows [i0, i1) of the group (the first n_long of them long
    // segments' rows), in the calls float weights need to give each row its bits alone
    // (`probe`: the expert's matrices, for their types).
    template <class Ffn>
    void for_group(int e, std::span<const cpu::MatmulOut> probe, const PassLayout& p, const float* xn, Ffn&& ffn);
    // Expert e's rows of y_, times their weights, added to their rows of out.
    void add_expert(int e, float* out);

    const models::Hparams& hp_;
    std::vector<float> logits_;      // n x n_expert router logits, then probabilities
    std::vector<int32_t> chosen_;    // n x n_expert_used
    std::vector<float> weight_;      // n x n_expert_used
    std::vector<int64_t> start_;     // n_expert + 1: where each expert's rows start in rows_
    std::vector<int64_t> rows_;      // pass rows grouped by expert
    std::vector<float> row_weight_;  // their weights for that expert
    std::vector<float> x_, gate_, up_;      // one group's inputs and hidden values
    std::vector<float> y_;                  // every group's outputs, by their place in rows_
    std::vector<float> shared_;             // the shared experts' outputs
    std::vector<int32_t> used_;             // the experts chosen in this pass
    std::vector<int32_t> waiting_;          // of those, the ones the host computes
    std::vector<int32_t> later_;             // of those, the ones still being read
    ExpertCache* cache_ = nullptr;
    RemoteExperts* remote_ = nullptr;
};

}  // namespace strata::runtime
