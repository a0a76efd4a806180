#include "runtime/spec/self_drafter.h"

#include <algorithm>

#include "core/error.h"
#include "runtime/spec/draft_engine.h"

namespace strata::runtime {

namespace {
// Weight of the past in an exit's counts, per draft it ran: recent text decides.
constexpr double kDecay = 0.9;
// An untried exit's counts: the benefit of the doubt (three of four kept), so that it is tried
// before the cheaper ones are settled on; one not run drifts back to them this much a draft.
constexpr double kPriorKept = 3, kPriorMissed = 1, kForget = 0.98;
// Drafts after which an exit not run is run once again: the text may have changed under it.
constexpr int32_t kRetryAfter = 32;
}  // namespace

std::vector<int32_t> exit_candidates(int32_t n_layer) {
    std::vector<int32_t> out;
    for (const int32_t eighths : {2, 3, 4}) {
        const int32_t layers = std::max<int32_t>(1, n_layer * eighths / 8);
        if (out.empty() || out.back() != layers) out.push_back(layers);
    }
    return out;
}

double exit_value(double acceptance, int32_t layers, int32_t n_layer, int32_t max_depth) {
    double best = 0, expected = 1, p = 1;
    for (int32_t k = 1; k <= max_depth; ++k) {
        expected += (p *= acceptance);
        best = std::max(best, expected / (double(n_layer) + double(k) * layers));
    }
    return best;
}

std::unique_ptr<Engine> open_early_layers(const Engine& target) {
    return std::make_unique<Engine>(draft_engine_options(target, DraftSource{}));
}

SelfDrafter::SelfDrafter(Engine& early, int32_t n_layer, int32_t max_depth)
    : early_(early), drafter_(early), n_layer_(n_layer), max_depth_(max_depth) {
    for (const int32_t layers : exit_candidates(n_layer))
        if (layers <= early.hparams().n_layer) exits_.push_back({layers, kPriorKept, kPriorMissed});
    STRATA_ASSERT(!exits_.empty());
}

void SelfDrafter::draft(std::span<const int32_t> context, int32_t max, std::vector<int32_t>& out) {
    early_.exit_after(exits_[at_].layers);
    drafter_.draft(context, max, out);
    drafted_ = out.size();
}

void SelfDrafter::accepted(int32_t accepted) {
    if (drafted_ == 0) return;
    for (size_t i = 0; i < exits_.size(); ++i) {
        Exit& e = exits_[i];
        if (i == at_) {
            e.kept = kDecay * e.kept + accepted;
            e.missed = kDecay * e.missed + (size_t(accepted) < drafted_ ? 1 : 0);
            e.idle = 0;
        } else {
            e.kept = kPriorKept + kForget * (e.kept - kPriorKept);
            e.missed = kPriorMissed + kForget * (e.missed - kPriorMissed);
            ++e.idle;
        }
    }
    drafted_ = 0;
    auto value = [&](const Exit& e) { return exit_value(e.acceptance(), e.layers, n_layer_, max_depth_); };
    size_t next = 0;
    for (size_t i = 1; i < exits_.size(); ++i)
        if (value(exits_[i]) > value(exits_[next])) next = i;
    for (size_t i = 0; i < exits_.size(); ++i)
        if (exits_[i].idle >= kRetryAfter) {
            next = i;
            break;
        }
    // Deeper layers hold no keys and values of the context yet.
    if (exits_[next].layers > exits_[at_].layers) drafter_.restart();
    at_ = next;
}

}  // namespace strata::runtime
