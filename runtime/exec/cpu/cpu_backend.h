#pragma once
// The CPU backend: the forward pass of every architecture on the CPU over the paged KV cache.
// One pass takes tokens of several sequences (each at its own positions, with its own block
// table). Each layer runs its program (runtime/exec/layer_program.h): the matmuls over all the
// pass's rows at once, so the weights are read once per pass for the whole batch; each run of
// row-wise steps (norms, biases, QK-norm, RoPE, the KV store, activations, residuals) as one
// parallel loop over the rows; attention per sequence (attention_pass); a mixture of experts
// through ffn_moe. A token's logits do not depend on the other tokens of its pass (PassMatmul;
// attention runs per row; experts add in a fixed order).
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "cpu/norm_rope_act.h"
#include "models/hparams.h"
#include "runtime/exec/backend.h"
#include "runtime/exec/cpu/ffn_moe.h"
#include "runtime/exec/cpu/kv_rebuild.h"
#include "runtime/exec/cpu/pass_matmul.h"
#include "runtime/exec/layer_program.h"
#include "runtime/exec/routing_stats.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/weights/model_weights.h"

namespace strata::runtime {

class WeightStore;

class CpuBackend : public Backend {
public:
    CpuBackend(const models::Hparams& hp, WeightStore& weights);
    std::string_view name() const override { return "cpu"; }
    const RoutingStats* routing_stats() const override { return stats_.get(); }
    // Adds `counts` ([layer][expert]) to the routing counted so far: another backend's, whose
    // run this one goes on with.
    void add_routing(const std::vector<std::vector<uint64_t>>& counts) {
        for (size_t il = 0; stats_ && il < counts.size(); ++il)
            for (size_t e = 0; e < counts[il].size(); ++e) stats_->add(int(il), int(e), counts[il][e]);
    }
    // Back to `saved`, an earlier RoutingStats::save of routing_stats().
    void restore_routing(const std::vector<uint64_t>& saved) {
        if (stats_) stats_->restore(saved);
    }

    // Opt-in (EngineOptions::int8_activations): single-level int8 activations, cpu::matmul's `int8`.
    void set_int8_activations(bool on) { mm_.set_int8_activations(on); }
    // Passes run layers [0, n) then the head (Engine::exit_after); every layer until set.
    void exit_after(int n_layers) { exit_ = n_layers; }
    // Bytes of activations a pass of up to kMaxUbatch tokens holds (logits not included).
    static uint64_t activation_bytes(const models::Hparams& hp);

    // For a device backend that runs some of its layers here (the plan's CPU layers) or a
    // mixture of experts' experts: the pass's activations are act(), row-major.
    void prepare(int64_t n_tokens) { reserve(n_tokens); }
    void begin_pass(const PassLayout& p, KvCache& kv);
    // Layer il on act(Act::X).
    void run_layer(int il, KvCache& kv, const PassLayout& p) { layer(il, kv, p); }
    // Layer il's mixture of experts alone: act(Out) = its experts of act(XN).
    void run_experts(int il, const PassLayout& p);
    float* act(Act a) { return acts_[static_cast<size_t>(a)].data(); }
    // A mixture of experts: the experts held on a device are computed there (null: none are).
    void set_remote_experts(RemoteExperts* remote) {
        if (moe_) moe_->set_remote_experts(remote);
    }

private:
    using Rows = StepRows<int64_t>;

    void reserve(int64_t n_tokens) override;
    void compute(const PassLayout& pass, KvCache& kv) override;
    void head(std::span<const int64_t> rows, float* logits, int64_t n_long) override;
    void hidden(std::span<const int64_t> rows, float* out) override;
    bool defers_verify_head() const override { return true; }  // the final hidden states stay in Act::X
    // Layer il's program, for the KV cache's context.
    const LayerProgram& program(int il, const KvCache& kv);
    Rows pass_rows(const PassLayout& p);
    // x += attention block, x += feed-forward block, with layer il's weights held meanwhile.
    void layer(int il, KvCache& kv, const PassLayout& p);

    // cpu_steps.cpp: the steps of a layer program on the CPU.
    void run(std::span<const Step> steps, const LayerProgram& prog, const LayerWeights& l, const Rows& r, KvCache& kv,
             const PassLayout* p);
    void pass_step(const Step& s, const LayerProgram& prog, const LayerWeights& l, const Rows& r, KvCache& kv,
                   const PassLayout* p);
    void row_step(const Step& s, const LayerProgram& prog, const LayerWeights& l, const Rows& r, KvCache& kv,
                  const cpu::RopeParams& rope, int64_t t) const;
    cpu::RopeParams rope_params(const RopeSpec& spec) const;
    // A HeadMatmul step: each head through its own matrix.
    void head_matmul(const Step& s, const LayerWeights& l, const Rows& r);
    // K and V of the positions the pass attends to but does not compute, from their saved
    // inputs (a layer the plan recomputes): the program's key_value steps again.
    void rebuild(const LayerProgram& prog, const LayerWeights& l, KvCache& kv);

    WeightStore& store_;
    const ModelWeights& w_;  // output head, embeddings and norms (always resident)
    PassMatmul mm_;
    std::vector<LayerProgram> programs_;
    int64_t programs_ctx_ = -1;             // the context programs_ were made for
    int exit_ = 0;                          // layers a pass runs; 0: all
    std::array<int64_t, kNumActs> width_{};  // act_width of each
    std::vector<RebuildRow> rebuild_rows_;  // the positions rebuilt layers rebuild in this pass
    std::unique_ptr<MoeFfn> moe_;           // mixture-of-experts models
    std::unique_ptr<RoutingStats> stats_;
    // Activations for one ubatch, token-major; a rebuild's inputs, outputs and rows.
    std::array<std::vector<float>, kNumActs> acts_;
    std::vector<float> rebuild_x_, rebuild_k_, rebuild_v_;
    std::vector<float> head_in_, head_out_;  // one head's rows of a HeadMatmul, in and out
    std::vector<int64_t> rebuild_pos_;
    std::vector<int32_t> rebuild_block_, rebuild_row_;
};

}  // namespace strata::runtime
