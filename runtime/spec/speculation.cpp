#include "runtime/spec/speculation.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "core/error.h"
#include "planner/speculation.h"

namespace strata::runtime {

namespace {
// Weight of the past in the acceptance counts, per verified draft: recent text decides.
constexpr double kDecay = 0.9;
}  // namespace

SpecMode parse_spec_mode(std::string_view name) {
    for (SpecMode m : {SpecMode::Auto, SpecMode::Off, SpecMode::Lookup, SpecMode::Draft, SpecMode::Self})
        if (spec_mode_name(m) == name) return m;
    throw UsageError(fmt::format("--spec {}: unknown drafter", name), "give auto, off, lookup, draft (with --draft-model) or self");
}

std::string_view spec_mode_name(SpecMode mode) {
    switch (mode) {
        case SpecMode::Auto: return "auto";
        case SpecMode::Off: return "off";
        case SpecMode::Lookup: return "lookup";
        case SpecMode::Draft: return "draft";
        case SpecMode::Self: return "self";
    }
    return "?";
}

void PassPrices::record(int64_t rows, double seconds) {
    if (rows < 1 || rows > kMaxRows) return;
    double& s = seconds_[size_t(rows)];
    s = s > 0 ? 0.8 * s + 0.2 * seconds : seconds;
}

void PassPrices::plan(int64_t rows, double seconds) {
    if (rows >= 1 && rows <= kMaxRows) planned_[size_t(rows)] = seconds;
}

double PassPrices::price(int64_t rows) const {
    if (rows >= 1 && rows <= kMaxRows && seconds_[size_t(rows)] <= 0 && planned_[size_t(rows)] > 0) return planned_[size_t(rows)];
    for (int64_t r = std::min(rows, kMaxRows); r >= 1; --r)
        if (seconds_[size_t(r)] > 0) return seconds_[size_t(r)];
    return 0;
}

Speculation::Speculation(std::unique_ptr<Drafter> drafter, const PassPrices& prices, int32_t max_depth, bool priced, int32_t width)
    : drafter_(std::move(drafter)), prices_(prices), max_depth_(max_depth), priced_(priced), width_(std::clamp(width, 1, kMaxDraftWidth)) {
    kept_.fill(1);
    missed_.fill(1);
}

std::vector<double> Speculation::chances(const DraftTree& tree) const {
    std::vector<double> chance(tree.size());
    std::vector<double> last(tree.size() + 1, 1);  // per parent (root at the back): the last child's chance
    std::vector<double> passed(tree.size() + 1, 1);  // per parent: the chance its children so far were not drawn
    std::vector<int32_t> children(tree.size() + 1);
    for (size_t i = 0; i < tree.size(); ++i) {
        const size_t p = tree.parent[i] < 0 ? tree.size() : size_t(tree.parent[i]);
        const int32_t r = std::min(children[p]++, kMaxDraftWidth - 1);
        const double from = tree.parent[i] < 0 ? 1.0 : chance[p];
        // Never above an earlier sibling's: the pass verifies a node's children in rank order.
        chance[i] = std::min(last[p], from * passed[p] * acceptance(r));
        last[p] = chance[i];
        passed[p] *= 1 - acceptance(r);
    }
    return chance;
}

void Speculation::choose(int64_t others, int32_t limit) {
    chosen_.clear();
    const auto chance = chances(guess_);
    std::vector<size_t> order(guess_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    // Most likely first; a parent is never less likely than its child, and comes first on a tie.
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return chance[a] > chance[b]; });
    order.resize(std::min(order.size(), size_t(limit)));
    size_t n = order.size();
    if (priced_) {
        std::vector<double> sorted(order.size());
        for (size_t i = 0; i < order.size(); ++i) sorted[i] = chance[order[i]];
        // The guesses are made: what drafting them cost is spent, only the pass's rows count.
        n = size_t(planner::forecast_draft([&](int64_t rows) { return prices_.price(rows); }, sorted, others).depth);
    }
    order.resize(n);
    std::sort(order.begin(), order.end());
    std::vector<int32_t> at(guess_.size(), -1);  // a guessed node's index among the chosen
    for (size_t i = 0; i < order.size(); ++i) {
        const int32_t p = guess_.parent[order[i]];
        at[order[i]] = static_cast<int32_t>(i);
        chosen_.add(guess_.tokens[order[i]], p < 0 ? -1 : at[size_t(p)]);
    }
}

const DraftTree& Speculation::draft(std::span<const int32_t> context, int64_t others, int32_t limit) {
    limit = static_cast<int32_t>(std::min<int64_t>({int64_t(limit), int64_t(max_depth_), PassPrices::kMaxRows - others - 1}));
    guess_.clear();
    chosen_.clear();
    if (limit <= 0) return chosen_;
    // Candidates beyond the pass's share: the most likely of them are verified.
    const int32_t candidates = std::min<int32_t>(2 * limit, int32_t(PassPrices::kMaxRows));
    if (!drafter_->costly()) {
        drafter_->draft_tree(context, limit, candidates, width_, guess_);
        choose(others, limit);
        return chosen_;
    }
    // A costly drafter guesses only the tokens to verify: as deep a chain as would pay if it
    // guessed it (its branches cost no passes of their own).
    const int32_t want = priced_ ? planner::forecast_speculation([&](int64_t rows) { return prices_.price(rows); }, acceptance(),
                                                                 limit, others, draft_price())
                                       .depth
                                 : limit;
    if (want == 0) return chosen_;
    const auto t0 = std::chrono::steady_clock::now();
    drafter_->draft_tree(context, want, candidates, width_, guess_);
    if (!guess_.empty()) {
        const double per_token = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / double(want);
        draft_seconds_ = draft_seconds_ > 0 ? 0.8 * draft_seconds_ + 0.2 * per_token : per_token;
    }
    choose(others, limit);
    return chosen_;
}

void Speculation::observe(const DraftTree& tree, int32_t node, int32_t drawn) {
    int32_t rank = 0;
    for (size_t c = 0; c < tree.size() && rank < kMaxDraftWidth; ++c) {
        if (tree.parent[c] != node) continue;
        if (tree.tokens[c] == drawn) {
            kept_[size_t(rank)] += 1;
            return;
        }
        missed_[size_t(rank++)] += 1;
    }
}

void Speculation::verified(std::span<const int32_t> path, int32_t next) {
    if (!chosen_.empty() || (!guess_.empty() && next >= 0))
        for (size_t r = 0; r < kept_.size(); ++r) kept_[r] *= kDecay, missed_[r] *= kDecay;
    if (!chosen_.empty()) {
        drafter_->accepted(static_cast<int32_t>(path.size()));
        int32_t node = -1;
        for (size_t k = 0; k <= path.size(); ++k) {
            const int32_t drawn = k < path.size() ? chosen_.tokens[size_t(path[k])] : next;
            if (drawn < 0) break;
            observe(chosen_, node, drawn);
            if (k < path.size()) node = path[k];
        }
    } else if (!guess_.empty() && next >= 0) {
        observe(guess_, -1, next);  // the shadow guess, against the token the plain step drew
    }
    guess_.clear();
    chosen_.clear();
}

}  // namespace strata::runtime
