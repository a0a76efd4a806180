#pragma once
// Drafting with a small model of the same vocabulary (--draft-model): its greedy tokens after
// the sequence, one of its passes each. The draft model keeps a sequence of its own per target
// sequence in its KV cache and brings it in line with the target's text before each draft
// (the tokens the target rejected cut off, the ones it drew since evaluated together).
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
    bool costly() const override { return true; }
    // Forgets its sequence: the next draft evaluates the whole context again (the model's
    // passes changed, as a self drafter's exit layer going deeper).
    void restart();

private:
    // The draft model's greedy token after the tokens evaluated so far, given the logits of one row.
    static int32_t argmax(std::span<const float> row);

    Engine& engine_;
    SeqId seq_ = -1;
};

}  // namespace strata::runtime
