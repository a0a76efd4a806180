#pragma once
// Drafting with a small model of the same vocabulary (--draft-model): its greedy tokens after
// the sequence, one of its passes each. The draft model keeps a sequence of its own per target
// sequence in its KV cache and brings it in line with the target's text before each draft
// (the tokens the target rejected cut off, the ones it drew since evaluated together). As a
// tree, its second choice branches off where it is unsure (nearly as likely as its first),
// at no pass of its own.
#include <memory>

#include "runtime/engine.h"
#include "runtime/spec/drafter.h"

namespace strata::runtime {

// Throws UsageError naming the first difference when the two models' vocabularies differ:
// a draft model's tokens must mean what the target's mean.
void check_same_vocabulary(const models::Tokenizer& target, const models::Tokenizer& draft);

class ModelDrafter : public Drafter {
public:
    // `draft` outlives the drafter; it is used on the calling thread only.
    explicit ModelDrafter(Engine& draft);
    ~ModelDrafter() override;
    void draft(std::span<const int32_t> context, int32_t max, std::vector<int32_t>& out) override;
    void draft_tree(std::span<const int32_t> context, int32_t depth, int32_t nodes, int32_t width, DraftTree& out) override;
    bool costly() const override { return true; }
    // Forgets its sequence: the next draft evaluates the whole context again (the model's
    // passes changed, as a self drafter's exit layer going deeper).
    void restart();

private:
    // Its greedy tokens into `out`; with `unsure`, per token the runner-up where it is nearly
    // as likely (-1 elsewhere).
    void guess(std::span<const int32_t> context, int32_t max, std::vector<int32_t>& out, std::vector<int32_t>* unsure);

    Engine& engine_;
    SeqId seq_ = -1;
};

}  // namespace strata::runtime
