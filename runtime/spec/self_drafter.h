#pragma once
// Self-speculation (--spec self): where no draft model exists, the model drafts for itself with
// its first layers alone (layer skip, as LayerSkip, Draft & Verify and SWIFT do): a pass through
// the first L_d layers, then the model's own output norm and head, greedy. The early layers run
// in an engine of their own (open_early_layers), a sequence of its own per target sequence (a
// ModelDrafter's). Lossless as every drafter: the target's verifying pass decides.
//
// L_d adapts to what is kept: each candidate exit (a quarter, three eighths and half of the
// layers) keeps its own acceptance rate, and each draft runs the one that gives the most tokens
// for the time a drafted token and a pass take, counting both in layers run (exit_value); an
// exit not run for a while is run once again.
// Going deeper evaluates the sequence's context again (its deeper layers hold no keys and
// values); going shallower keeps them.
#include <memory>
#include <vector>

#include "runtime/spec/model_drafter.h"

namespace strata::runtime {

// The exits a self drafter chooses among for a model of n_layer layers, ascending and distinct.
std::vector<int32_t> exit_candidates(int32_t n_layer);
// Expected tokens a pass yields per layer of work when drafts exit after `layers` of n_layer
// and each drafted token is kept with probability `acceptance`: the best over chains of 1 to
// max_depth drafts of (1 + a + ... + a^k) / (n_layer + k * layers). (Whether drafting pays at
// all is Speculation's choice, at the measured prices.)
double exit_value(double acceptance, int32_t layers, int32_t n_layer, int32_t max_depth);

// The target's model file, its first exit_candidates().back() layers alone, held in memory on the
// CPU with a context as long as the target's and room for as many positions as its KV cache,
// within the share of the target's DRAM budget it holds (runtime/spec/draft_engine.h).
std::unique_ptr<Engine> open_early_layers(const Engine& target);

class SelfDrafter : public Drafter {
public:
    // `early`: open_early_layers(target) (outlives the drafter, used on the calling thread only);
    // n_layer: the target's layers; max_depth: the most drafts a pass verifies.
    SelfDrafter(Engine& early, int32_t n_layer, int32_t max_depth);
    void draft(std::span<const int32_t> context, int32_t max, std::vector<int32_t>& out) override;
    void accepted(int32_t accepted) override;
    bool costly() const override { return true; }
    // The layers the next draft runs.
    int32_t exit_layers() const { return exits_[at_].layers; }

private:
    struct Exit {
        int32_t layers;
        double kept, missed;  // decayed counts of drafts kept and of first misses
        int32_t idle = 0;     // drafts since it last ran
        double acceptance() const { return kept / (kept + missed); }
    };

    Engine& early_;
    ModelDrafter drafter_;
    int32_t n_layer_, max_depth_;
    std::vector<Exit> exits_;
    size_t at_ = 0;        // the exit the drafts run
    size_t drafted_ = 0;   // tokens of the last draft
};

}  // namespace strata::runtime
