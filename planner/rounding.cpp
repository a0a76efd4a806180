#include "planner/rounding.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

namespace strata::planner {

bool fits(const MemoryUse& u, const Budgets& b) {
    auto ok = [](double used, double budget) { return used <= budget * (1 + 1e-9) + 1.0; };
    return ok(u.gpu, b.gpu) && ok(u.dram, b.dram) && ok(u.nvme, b.nvme);
}

namespace {

// Splits n whole items over shares that sum to 1, by largest remainder.
template <size_t K>
std::array<int, K> apportion(int n, const std::array<double, K>& share) {
    std::array<int, K> count{};
    std::array<double, K> rem{};
    int given = 0;
    for (size_t i = 0; i < K; ++i) {
        const double exact = n * std::max(0.0, share[i]);
        count[i] = static_cast<int>(std::floor(exact + 1e-9));
        rem[i] = exact - count[i];
        given += count[i];
    }
    while (given < n) {
        const size_t best = static_cast<size_t>(std::max_element(rem.begin(), rem.end()) - rem.begin());
        ++count[best], rem[best] = -1, ++given;
    }
    while (given > n) {  // only from float noise
        for (size_t i = K; i-- > 0;)
            if (count[i] > 0 && given > n) --count[i], --given;
    }
    return count;
}

template <size_t K>
int argmax(const std::array<double, K>& a) {
    return static_cast<int>(std::max_element(a.begin(), a.end()) - a.begin());
}

int tier_rank(Tier t) { return t == Tier::Gpu ? 0 : t == Tier::Dram ? 1 : 2; }

// A one-unit change of the plan: which unit and the option it would take.
struct Move {
    enum class What { LayerWeights, LayerKv, Output, Embedding, Hidden } what;
    int32_t layer = 0;
    int option = 0;
};

void apply(Plan& p, const CostModel& cm, const Move& m) {
    switch (m.what) {
        case Move::What::LayerWeights: p.layers[static_cast<size_t>(m.layer)].weights = static_cast<WeightOption>(m.option); break;
        case Move::What::LayerKv: {
            auto& l = p.layers[static_cast<size_t>(m.layer)];
            l.kv = static_cast<KvOption>(m.option);
            l.attention = cm.attention_device(l.kv);
            break;
        }
        case Move::What::Output: p.output = static_cast<WeightOption>(m.option); break;
        case Move::What::Embedding: p.embedding = static_cast<WeightOption>(m.option); break;
        case Move::What::Hidden: p.hidden = static_cast<HiddenOption>(m.option); break;
    }
}

// Candidate moves: one layer per (group, current option), since identical layers with the
// same option are interchangeable; `down` moves to a slower tier, else to a faster tier; both
// also to the other device on the same tier (DRAM weights used by the CPU or copied to the GPU:
// a layer copied in frees the device's staging by staying in DRAM for the CPU, where moving
// down would read it from NVMe).
std::vector<Move> candidates(const Plan& p, const CostModel& cm, const std::vector<LayerGroup>& groups, bool down) {
    std::vector<Move> out;
    auto better = [&](Tier from, Tier to) { return down ? tier_rank(to) >= tier_rank(from) : tier_rank(to) <= tier_rank(from); };
    for (const auto& g : groups) {
        std::array<int32_t, kNumWeightOptions> w_rep;
        std::array<int32_t, kNumKvOptions> k_rep;
        w_rep.fill(-1), k_rep.fill(-1);
        for (int32_t i = g.first; i < g.first + g.n; ++i) {
            const auto& l = p.layers[static_cast<size_t>(i)];
            // Move the last layer holding an option down and the first one up, so tiers stay in runs.
            if (down || w_rep[static_cast<size_t>(l.weights)] < 0) w_rep[static_cast<size_t>(l.weights)] = i;
            if (down || k_rep[static_cast<size_t>(l.kv)] < 0) k_rep[static_cast<size_t>(l.kv)] = i;
        }
        for (int from = 0; from < kNumWeightOptions; ++from) {
            if (w_rep[from] < 0) continue;
            for (int to = 0; to < kNumWeightOptions; ++to)
                if (to != from && cm.allowed(static_cast<WeightOption>(to)) && better(tier_of(static_cast<WeightOption>(from)), tier_of(static_cast<WeightOption>(to))))
                    out.push_back({Move::What::LayerWeights, w_rep[from], to});
        }
        for (int from = 0; from < kNumKvOptions; ++from) {
            if (k_rep[from] < 0) continue;
            for (int to = 0; to < kNumKvOptions; ++to)
                if (to != from && cm.allowed(static_cast<KvOption>(to)) && better(tier_of(static_cast<KvOption>(from)), tier_of(static_cast<KvOption>(to))))
                    out.push_back({Move::What::LayerKv, k_rep[from], to});
        }
    }
    for (int to = 0; to < kNumWeightOptions; ++to)
        if (to != static_cast<int>(p.output) && cm.allowed_output(static_cast<WeightOption>(to)) && better(tier_of(p.output), tier_of(static_cast<WeightOption>(to))))
            out.push_back({Move::What::Output, 0, to});
    if (cm.shape().embd_bytes > 0)
        for (auto to : {WeightOption::Gpu, WeightOption::DramCpu, WeightOption::NvmeCpu})
            if (to != p.embedding && cm.allowed_embedding(to) && better(tier_of(p.embedding), tier_of(to))) out.push_back({Move::What::Embedding, 0, static_cast<int>(to)});
    const Tier h = p.hidden == HiddenOption::Gpu ? Tier::Gpu : Tier::Dram;
    if (down && h == Tier::Gpu && cm.allowed(HiddenOption::Dram)) out.push_back({Move::What::Hidden, 0, static_cast<int>(HiddenOption::Dram)});
    if (!down && h == Tier::Dram && cm.allowed(HiddenOption::Gpu)) out.push_back({Move::What::Hidden, 0, static_cast<int>(HiddenOption::Gpu)});
    return out;
}

double over(const MemoryUse& u, const Budgets& b) {
    return std::max(0.0, u.gpu - b.gpu) + std::max(0.0, u.dram - b.dram) + std::max(0.0, u.nvme - b.nvme);
}

// Every one-unit move: to a slower tier, to a faster one, or to the other device on its tier.
std::vector<Move> all_moves(const Plan& p, const CostModel& cm, const std::vector<LayerGroup>& groups) {
    std::vector<Move> out = candidates(p, cm, groups, /*down=*/true);
    for (const Move& m : candidates(p, cm, groups, /*down=*/false)) out.push_back(m);
    return out;
}

// The repair's next step: the move that lowers the overflow at the least cost in seconds per byte
// freed, whichever way it goes (a unit of a full tier to a faster one with room helps as well as
// one to a slower tier). Where no single move lowers it, the best pair whose first move adds no
// overflow and makes room that the second uses: a device layer streamed from NVMe instead leaves
// room on the device for a unit that DRAM cannot hold. Where no pair does, every layer of one
// weight option moved to another. Empty when none exists.
std::vector<Move> repair_step(const Plan& plan, const CostModel& cm, const Budgets& budgets, const std::vector<LayerGroup>& groups,
                              const Prediction& pred) {
    const double over0 = over(pred.used, budgets);
    double best_score = INFINITY;
    std::vector<Move> best;
    // The overflow a trial frees, its score kept when it is the best so far.
    auto consider = [&](const Plan& trial, std::vector<Move> moves) {
        const Prediction q = cm.predict(trial);
        const double freed = over0 - over(q.used, budgets);
        if (freed <= 0) return freed;
        const double score = (q.objective_s - pred.objective_s) / freed;
        if (score < best_score) best_score = score, best = std::move(moves);
        return freed;
    };
    std::vector<Move> room;  // moves that add no overflow: first moves of a pair
    for (const Move& m : all_moves(plan, cm, groups)) {
        Plan trial = plan;
        apply(trial, cm, m);
        if (consider(trial, {m}) > -1.0 /* bytes: sums of whole bytes */) room.push_back(m);
    }
    if (!best.empty()) return best;
    for (const Move& first : room) {
        Plan made_room = plan;
        apply(made_room, cm, first);
        for (const Move& m : all_moves(made_room, cm, groups)) {
            Plan trial = made_room;
            apply(trial, cm, m);
            consider(trial, {first, m});
        }
    }
    if (!best.empty()) return best;
    // The device's staging is its largest copied-in layer's, not a sum: with three or more
    // layers copied in, no one or two moves free it. Every layer of one weight option moved at once.
    for (int from = 0; from < kNumWeightOptions; ++from)
        for (int to = 0; to < kNumWeightOptions; ++to) {
            if (to == from || !cm.allowed(static_cast<WeightOption>(to))) continue;
            std::vector<Move> every;
            for (const LayerPlacement& l : plan.layers)
                if (static_cast<int>(l.weights) == from) every.push_back({Move::What::LayerWeights, l.layer, to});
            if (every.size() < 3) continue;  // tried above
            Plan trial = plan;
            for (const Move& m : every) apply(trial, cm, m);
            consider(trial, std::move(every));
        }
    return best;
}

// Whether a plan's decode step is within a bound (none: 0).
struct DecodeBound {
    double max_s = 0;
    bool operator()(const Prediction& q) const { return max_s <= 0 || q.decode.time_s <= max_s * (1 + 1e-9); }
};

// A decode step over the bound shortened: while it is over, the move (to any tier or device)
// that fits and saves decode time at the least cost in objective per second saved (of those
// costing nothing, the one saving most). The LP's relaxation overlaps the link's copies with the
// CPU's layers more than whole layers can, so a plan rounded from shares within the bound can
// land past it. False where no move helps.
bool meet_decode_bound(Plan& plan, const CostModel& cm, const Budgets& budgets, const std::vector<LayerGroup>& groups,
                       Prediction& pred, const DecodeBound& within) {
    for (int step = 0; !within(pred); ++step) {
        if (step > 4 * cm.shape().n_layer + 16) return false;
        std::pair<double, double> best_score{INFINITY, 0};  // cost per second saved, then less saved
        std::optional<Plan> best;
        Prediction best_q;
        for (const Move& m : all_moves(plan, cm, groups)) {
            Plan trial = plan;
            apply(trial, cm, m);
            const Prediction q = cm.predict(trial);
            const double saved = pred.decode.time_s - q.decode.time_s;
            if (!fits(q.used, budgets) || saved <= 0) continue;
            const std::pair score{std::max(0.0, q.objective_s - pred.objective_s) / saved, -saved};
            if (score < best_score) best_score = score, best = std::move(trial), best_q = q;
        }
        if (!best) return false;
        plan = std::move(*best);
        pred = best_q;
    }
    return true;
}

// The same device's reads from the next tier up: NVMe to DRAM, DRAM copied over the link to held
// on the device; `o` itself where there is none.
WeightOption held_closer(WeightOption o) {
    switch (o) {
        case WeightOption::NvmeCpu: return WeightOption::DramCpu;
        case WeightOption::NvmeToGpu: return WeightOption::DramToGpu;
        case WeightOption::DramToGpu: return WeightOption::Gpu;
        default: return o;
    }
}

// Weights read from NVMe or copied over the link each step where holding them a tier closer fits
// the budgets and prices no worse. The objective does not see a read that overlaps longer work,
// but the read still occupies the disk or the link (and, on the simulated device, a core) while
// the memory to hold it is free: the improve pass keeps only strict gains.
void hold_weights(Plan& plan, const CostModel& cm, const Budgets& budgets, Prediction& pred, const DecodeBound& within) {
    auto try_hold = [&](WeightOption& o, auto allowed) {
        for (WeightOption to = held_closer(o); to != o && allowed(to); to = held_closer(o)) {
            const WeightOption from = o;
            o = to;
            const Prediction q = cm.predict(plan);
            if (!fits(q.used, budgets) || q.objective_s > pred.objective_s * (1 + 1e-12) || !within(q)) {
                o = from;
                return;
            }
            pred = q;
        }
    };
    for (LayerPlacement& l : plan.layers) try_hold(l.weights, [&](WeightOption o) { return cm.allowed(o); });
    try_hold(plan.output, [&](WeightOption o) { return cm.allowed_output(o); });
}

}  // namespace

bool round_plan(const CostModel& cm, const Budgets& budgets, const LpSolution& sol, Plan& plan, double max_decode_s) {
    const DecodeBound within{max_decode_s};
    const std::vector<LayerGroup> groups = group_layers(cm.shape());
    plan.layers.assign(static_cast<size_t>(cm.shape().n_layer), {});
    for (const auto& gs : sol.groups) {
        const auto wc = apportion(gs.n_layers, gs.weights);
        const auto kc = apportion(gs.n_layers, gs.kv);
        // Faster tiers first: within a group the layer order does not change the cost.
        int32_t i = gs.first_layer;
        for (int o = 0; o < kNumWeightOptions; ++o)
            for (int c = 0; c < wc[o]; ++c) plan.layers[static_cast<size_t>(i++)].weights = static_cast<WeightOption>(o);
        constexpr KvOption kv_order[] = {KvOption::Gpu, KvOption::ActGpu, KvOption::Dram, KvOption::ActDram, KvOption::Nvme, KvOption::ActNvme};
        i = gs.first_layer;
        for (KvOption o : kv_order)
            for (int c = 0; c < kc[static_cast<size_t>(o)]; ++c) plan.layers[static_cast<size_t>(i++)].kv = o;
    }
    for (int32_t i = 0; i < cm.shape().n_layer; ++i) {
        auto& l = plan.layers[static_cast<size_t>(i)];
        l.layer = i;
        l.attention = cm.attention_device(l.kv);
    }
    plan.output = static_cast<WeightOption>(argmax(sol.output));
    plan.embedding = cm.shape().embd_bytes > 0 ? static_cast<WeightOption>(argmax(sol.embedding))
                                               : (cm.allowed_embedding(WeightOption::Gpu) ? WeightOption::Gpu : WeightOption::DramCpu);
    plan.hidden = static_cast<HiddenOption>(argmax(sol.hidden));

    // Repair: while over budget, take the move (or pair of moves) that frees the most overflow
    // per second lost.
    Prediction pred = cm.predict(plan);
    for (int step = 0; !fits(pred.used, budgets); ++step) {
        if (step > 4 * cm.shape().n_layer + 16) return false;
        const std::vector<Move> moves = repair_step(plan, cm, budgets, groups, pred);
        if (moves.empty()) return false;
        for (const Move& m : moves) apply(plan, cm, m);
        pred = cm.predict(plan);
    }
    if (!meet_decode_bound(plan, cm, budgets, groups, pred, within)) return false;
    // Improve: move units up, or to the other device, while that fits and lowers the objective.
    for (int step = 0; step < 2 * cm.shape().n_layer + 8; ++step) {
        double best_obj = pred.objective_s * (1 - 1e-9);
        std::optional<Move> best;
        for (const Move& m : candidates(plan, cm, groups, /*down=*/false)) {
            Plan trial = plan;
            apply(trial, cm, m);
            const Prediction q = cm.predict(trial);
            if (fits(q.used, budgets) && q.objective_s < best_obj && within(q)) best_obj = q.objective_s, best = m;
        }
        if (!best) break;
        apply(plan, cm, *best);
        pred = cm.predict(plan);
    }
    hold_weights(plan, cm, budgets, pred, within);
    // A layer whose matmuls run on the CPU beside a device attends there (CostModel::placed_layer).
    for (auto& l : plan.layers)
        if (cm.has_gpu() && device_of(l.weights) == Device::Cpu) l.attention = Device::Cpu;
    plan.prediction = pred;
    return true;
}

}  // namespace strata::planner
