#include "planner/lp_placement.h"

#include <glpk.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <optional>
#include <string>

#include "core/error.h"
#include "planner/units.h"

namespace strata::planner {

std::vector<LayerGroup> group_layers(const ModelShape& shape) {
    std::vector<LayerGroup> g;
    for (int32_t i = 0; i < shape.n_layer; ++i) {
        if (!g.empty() && shape.layers[static_cast<size_t>(i)] == shape.layers[static_cast<size_t>(g.back().first)])
            ++g.back().n;
        else
            g.push_back({i, 1});
    }
    return g;
}

namespace {

constexpr int kH = static_cast<int>(Stream::PcieH2D), kD = static_cast<int>(Stream::PcieD2H),
              kN = static_cast<int>(Stream::Nvme), kR = static_cast<int>(Stream::Dram),
              kG = static_cast<int>(Stream::GpuCompute), kC = static_cast<int>(Stream::CpuCompute);

// A placement column: its cost at value 1 (for a group: all its layers), and the staging
// space one of its layers needs while it streams in.
struct Column {
    Cost cost;
    double gpu_need = 0, dram_need = 0;
};

// Builds the LP as rows of (column, coefficient) and hands them to GLPK in one load.
class LpBuilder {
public:
    int add_col(double lo, double hi, bool fixed_zero = false) {
        lo_.push_back(fixed_zero ? 0 : lo);
        hi_.push_back(fixed_zero ? 0 : hi);
        return static_cast<int>(lo_.size());  // GLPK columns are 1-based
    }
    // type: GLP_LO (>= b), GLP_UP (<= b), GLP_FX (== b)
    int add_row(int type, double b) {
        rows_.push_back({type, b, {}});
        return static_cast<int>(rows_.size());
    }
    void set(int row, int col, double v) {
        STRATA_ASSERT(std::isfinite(v));
        if (v != 0) rows_[static_cast<size_t>(row - 1)].terms.push_back({col, v});
    }
    glp_prob* build() const {
        glp_prob* lp = glp_create_prob();
        glp_add_cols(lp, static_cast<int>(lo_.size()));
        for (size_t j = 0; j < lo_.size(); ++j) {
            const int c = static_cast<int>(j + 1);
            if (hi_[j] < 0) glp_set_col_bnds(lp, c, GLP_LO, lo_[j], 0);
            else if (hi_[j] == lo_[j]) glp_set_col_bnds(lp, c, GLP_FX, lo_[j], lo_[j]);
            else glp_set_col_bnds(lp, c, GLP_DB, lo_[j], hi_[j]);
        }
        glp_add_rows(lp, static_cast<int>(rows_.size()));
        std::vector<int> ia{0}, ja{0};
        std::vector<double> ar{0};
        for (size_t i = 0; i < rows_.size(); ++i) {
            const int r = static_cast<int>(i + 1);
            glp_set_row_bnds(lp, r, rows_[i].type, rows_[i].b, rows_[i].b);
            for (auto [c, v] : rows_[i].terms) ia.push_back(r), ja.push_back(c), ar.push_back(v);
        }
        glp_load_matrix(lp, static_cast<int>(ar.size() - 1), ia.data(), ja.data(), ar.data());
        return lp;
    }

private:
    struct Row {
        int type;
        double b;
        std::vector<std::pair<int, double>> terms;
    };
    std::vector<double> lo_, hi_;
    std::vector<Row> rows_;
};

using ProbPtr = std::unique_ptr<glp_prob, decltype(&glp_delete_prob)>;

constexpr int kSimplexIterations = 20000;

// Returns true when GLPK found an optimum. The primal simplex can stall on a degenerate
// problem (it cycled for minutes on one SmolLM2 device plan): it gets an iteration limit, far
// above what these problems take, and then the dual simplex from a fresh basis.
bool run_simplex(glp_prob* lp) {
    glp_smcp parm;
    glp_init_smcp(&parm);
    parm.msg_lev = GLP_MSG_OFF;
    parm.presolve = GLP_OFF;
    parm.it_lim = kSimplexIterations;
    int rc = glp_simplex(lp, &parm);
    if (rc == GLP_EITLIM) {
        glp_std_basis(lp);
        parm.meth = GLP_DUALP;
        rc = glp_simplex(lp, &parm);
    }
    return rc == 0 && glp_get_status(lp) == GLP_OPT;
}

}  // namespace

std::vector<LpCase> lp_cases(const CostModel& cm, const std::vector<LayerGroup>& groups) {
    // The smallest staging any streamed layer needs: a whole layer of weights, double-buffered
    // (on the GPU when one computes it or prefills it; in DRAM when it comes from NVMe), or
    // for KV on NVMe one micro-batch's cache of a layer.
    double min_w = cm.output(WeightOption::DramCpu).gpu_staging;
    double min_nvme_w = cm.allowed_head(WeightOption::NvmeCpu) ? cm.output(WeightOption::NvmeCpu).dram_staging : INFINITY;
    double min_nvme_kv = INFINITY;
    for (const auto& g : groups) {
        min_w = std::min(min_w, cm.layer_weights(g.first, WeightOption::DramCpu).gpu_staging);
        min_nvme_w = std::min(min_nvme_w, cm.layer_weights(g.first, WeightOption::NvmeCpu).dram_staging);
        for (KvOption o : {KvOption::Nvme, KvOption::ActNvme})
            if (cm.allowed(o)) min_nvme_kv = std::min(min_nvme_kv, cm.layer_kv(g.first, o).dram_staging);
    }
    enum class Nvme { None, KvOnly, Weights };
    std::vector<LpCase> out;
    for (bool resident : {true, false}) {
        if (resident && !cm.has_gpu()) continue;
        for (Nvme n : {Nvme::None, Nvme::KvOnly, Nvme::Weights}) {
            LpCase c;
            c.weights_resident = resident;
            c.no_nvme = n == Nvme::None;
            c.no_nvme_weights = n != Nvme::Weights;
            c.min_gpu_staging = cm.has_gpu() && !resident ? min_w : 0;
            // KV-only on NVMe: at least one layer's KV staged. Weights on NVMe: a layer of them
            // (any KV there too shares the same staging slot in the worst case).
            c.min_dram_staging = n == Nvme::Weights ? min_nvme_w : n == Nvme::KvOnly && std::isfinite(min_nvme_kv) ? min_nvme_kv : 0;
            if (resident && n == Nvme::Weights) continue;  // resident weights are never on NVMe
            out.push_back(c);
        }
    }
    return out;
}

LpSolution solve_placement(const CostModel& cm, const Budgets& budgets, const std::vector<LayerGroup>& groups,
                           const LpCase& lp_case) {
    const double min_gpu_staging = lp_case.min_gpu_staging, min_dram_staging = lp_case.min_dram_staging;
    auto weight_ok = [&](WeightOption o) {
        if (!cm.allowed(o)) return false;
        if (lp_case.weights_resident && o != WeightOption::Gpu) return false;
        return !((lp_case.no_nvme || lp_case.no_nvme_weights) && tier_of(o) == Tier::Nvme);
    };
    auto kv_ok = [&](KvOption o) { return cm.allowed(o) && !(lp_case.no_nvme && tier_of(o) == Tier::Nvme); };
    LpSolution sol;
    const Cost fixed = cm.fixed();
    // Capacity rows in GiB keep the matrix well scaled next to seconds.
    const double cap[3] = {(budgets.gpu - fixed.bytes[0]) / kGiB, (budgets.dram - fixed.bytes[1]) / kGiB, budgets.nvme / kGiB};
    if (cap[0] < 0 || cap[1] < 0 || cap[2] < 0) return sol;

    LpBuilder b;
    std::vector<Column> cols(1);  // indexed by GLPK column; [0] unused
    // `whole`: the column's cost at value 1 (a group's layers), where not `per_unit`'s (one
    // layer's, whose staging it needs).
    auto placement_col = [&](const Cost& per_unit, bool allowed, const std::optional<Cost>& whole = std::nullopt) {
        const int j = b.add_col(0, 1, !allowed);
        cols.resize(static_cast<size_t>(j) + 1);
        // A column held at 0 carries no cost: a choice that needs a missing GPU prices at infinity.
        if (allowed) cols[static_cast<size_t>(j)] = {whole.value_or(per_unit), per_unit.gpu_staging, per_unit.dram_staging};
        return j;
    };
    auto plain_col = [&](double hi = -1) {  // T and buffers: no cost of their own
        const int j = b.add_col(0, hi);
        cols.resize(static_cast<size_t>(j) + 1);
        return j;
    };

    // A group's KV columns come in one set per device its matmuls may run on, each priced as
    // the runtime runs the pair (CostModel::layer_kv_beside); the set's shares sum to the
    // weights' shares on that device. K and V on the device only beside matmuls there.
    const std::vector<Device> weight_devices = cm.has_gpu() ? std::vector{Device::Gpu, Device::Cpu} : std::vector{Device::Cpu};
    struct GroupCols {
        std::array<int, kNumWeightOptions> w{};
        std::array<std::array<int, kNumKvOptions>, 2> k{};  // by weight_devices
        std::vector<int> kv_cols() const {
            std::vector<int> all;
            for (const auto& set : k)
                for (int j : set)
                    if (j) all.push_back(j);
            return all;
        }
    };
    std::vector<GroupCols> gcols(groups.size());
    for (size_t gi = 0; gi < groups.size(); ++gi) {
        const auto& g = groups[gi];
        for (int o = 0; o < kNumWeightOptions; ++o) {
            const auto opt = static_cast<WeightOption>(o);
            // Rounding keeps a group's layers at one option in a run.
            gcols[gi].w[o] = placement_col(cm.layer_weights(g.first, opt), weight_ok(opt), cm.run_weights(g.first, g.n, opt));
        }
        for (size_t d = 0; d < weight_devices.size(); ++d)
            for (int o = 0; o < kNumKvOptions; ++o) {
                const auto opt = static_cast<KvOption>(o);
                const bool ok = kv_ok(opt) && (weight_devices[d] == Device::Gpu || tier_of(opt) != Tier::Gpu);
                const Cost kv = cm.layer_kv_beside(g.first, opt, weight_devices[d]);
                gcols[gi].k[d][o] = placement_col(kv, ok, kv.scaled(g.n));
            }
    }
    std::array<int, kNumWeightOptions> out_cols{}, embd_cols{};
    for (int o = 0; o < kNumWeightOptions; ++o) {
        const auto opt = static_cast<WeightOption>(o);
        out_cols[o] = placement_col(cm.output(opt), weight_ok(opt) && cm.allowed_output(opt) && (!lp_case.output || *lp_case.output == opt));
    }
    const bool has_embd = cm.shape().embd_bytes > 0;
    if (has_embd)
        for (int o = 0; o < kNumWeightOptions; ++o) {
            const auto opt = static_cast<WeightOption>(o);
            // A lookup table is only ever resident: on the GPU, or read by the CPU from DRAM or NVMe.
            const bool lookup = opt == WeightOption::Gpu || opt == WeightOption::DramCpu || opt == WeightOption::NvmeCpu;
            embd_cols[o] = placement_col(cm.embedding(opt), lookup && cm.allowed_embedding(opt) && !(lp_case.no_nvme && tier_of(opt) == Tier::Nvme) &&
                                                                   (!lp_case.embedding || *lp_case.embedding == opt));
        }
    std::array<int, kNumHiddenOptions> hid_cols{};
    for (int o = 0; o < kNumHiddenOptions; ++o) {
        const auto opt = static_cast<HiddenOption>(o);
        hid_cols[o] = placement_col(cm.hidden(opt), cm.allowed(opt) && (!lp_case.hidden || *lp_case.hidden == opt));
    }
    const int n_placement = static_cast<int>(cols.size()) - 1;
    const int Tp = plain_col(), Td = plain_col(lp_case.max_decode_s > 0 ? lp_case.max_decode_s : -1);
    const int bufG = b.add_col(min_gpu_staging / kGiB, -1), bufD = b.add_col(min_dram_staging / kGiB, -1);
    cols.resize(cols.size() + 2);
    // The captured decode graph's saving holds only when every layer's weights and KV are on the
    // device: `whole` is held at or under each group's share of both, so that it is 1 for such
    // a plan and 0 for any other whole-layer one.
    const double graph_saving = cm.has_gpu() ? cm.graph_saving_whole_s() : 0;
    const int whole = graph_saving > 0 ? plain_col(1) : 0;
    if (whole)
        for (const auto& gc : gcols)
            for (int j : {gc.w[static_cast<int>(WeightOption::Gpu)], gc.k[0][static_cast<int>(KvOption::Gpu)]}) {
                const int r = b.add_row(GLP_UP, 0);
                b.set(r, whole, 1);
                b.set(r, j, -1);
            }

    // Each unit is placed exactly once.
    auto convex = [&](const auto& ids) {
        const int r = b.add_row(GLP_FX, 1);
        for (int j : ids) b.set(r, j, 1);
    };
    for (const auto& gc : gcols) {
        convex(gc.w);
        for (size_t d = 0; d < weight_devices.size(); ++d) {
            const int r = b.add_row(GLP_FX, 0);
            for (int j : gc.k[d]) b.set(r, j, 1);
            for (int o = 0; o < kNumWeightOptions; ++o)
                if (device_of(static_cast<WeightOption>(o)) == weight_devices[d]) b.set(r, gc.w[o], -1);
        }
    }
    convex(out_cols);
    if (has_embd) convex(embd_cols);
    convex(hid_cols);

    // Phase time bounds: T >= each I/O stream; T >= the compute chain + what cannot overlap.
    for (Phase ph : {Phase::Prefill, Phase::Decode}) {
        const int T = ph == Phase::Prefill ? Tp : Td;
        auto streams = [&](const Cost& c) -> const std::array<double, kNumStreams>& { return ph == Phase::Prefill ? c.prefill : c.decode; };
        for (int s : {kH, kD, kN, kR}) {
            const int r = b.add_row(GLP_LO, streams(fixed)[s]);
            b.set(r, T, 1);
            for (int j = 1; j <= n_placement; ++j) b.set(r, j, -streams(cols[static_cast<size_t>(j)].cost)[s]);
        }
        for (int k = 0; k < cm.compute_chains(ph); ++k) {
            auto chain = [&](const Cost& c) { return cm.compute_chain(ph, c, k); };
            const int r = b.add_row(GLP_LO, chain(fixed));
            b.set(r, T, 1);
            for (int j = 1; j <= n_placement; ++j) b.set(r, j, -chain(cols[static_cast<size_t>(j)].cost));
            if (whole && ph == Phase::Decode) b.set(r, whole, graph_saving);  // each chain holds the step's overhead
        }
    }

    // Staging: the buffer holds what one layer streams in (its weights and its KV together).
    // Fractional shares make this FlexGen's relaxation 2·W·(1 - w_gpu); rounding makes it exact.
    auto need = [&](int j, bool gpu) { return (gpu ? cols[static_cast<size_t>(j)].gpu_need : cols[static_cast<size_t>(j)].dram_need) / kGiB; };
    for (bool gpu : {true, false}) {
        const int buf = gpu ? bufG : bufD;
        for (const auto& gc : gcols) {
            const int r = b.add_row(GLP_LO, 0);
            b.set(r, buf, 1);
            for (int j : gc.w) b.set(r, j, -need(j, gpu));
            for (int j : gc.kv_cols()) b.set(r, j, -need(j, gpu));
        }
        const int r = b.add_row(GLP_LO, 0);
        b.set(r, buf, 1);
        for (int j : out_cols) b.set(r, j, -need(j, gpu));
    }

    // Capacity per tier (hidden-state staging sits beside the layer buffers).
    for (int t = 0; t < 3; ++t) {
        const int r = b.add_row(GLP_UP, cap[t]);
        for (int j = 1; j <= n_placement; ++j) b.set(r, j, cols[static_cast<size_t>(j)].cost.bytes[t] / kGiB);
        if (t == 0) {
            b.set(r, bufG, 1);
            for (int j : hid_cols) b.set(r, j, need(j, true));
        }
        if (t == 1) b.set(r, bufD, 1);
    }

    ProbPtr lp(b.build(), &glp_delete_prob);
    glp_term_out(GLP_OFF);
    glp_set_obj_dir(lp.get(), GLP_MIN);
    const double scale = cm.objective_scale();
    const double n_dec = cm.n_decode_steps();
    glp_set_obj_coef(lp.get(), Tp, 1.0 / scale);
    glp_set_obj_coef(lp.get(), Td, n_dec / scale);
    glp_scale_prob(lp.get(), GLP_SF_AUTO);
    if (!run_simplex(lp.get())) return sol;
    const double best = glp_get_obj_val(lp.get());

    // Second solve: hold the optimum, minimise the total busy time of every stream.
    const int hold = glp_add_rows(lp.get(), 1);
    {
        int idx[3] = {0, Tp, Td};
        double val[3] = {0, 1.0 / scale, n_dec / scale};
        glp_set_mat_row(lp.get(), hold, 2, idx, val);
        glp_set_row_bnds(lp.get(), hold, GLP_UP, 0, best * (1 + 1e-7) + 1e-12);
    }
    glp_set_obj_coef(lp.get(), Tp, 0);
    glp_set_obj_coef(lp.get(), Td, 0);
    for (int j = 1; j <= n_placement; ++j) {
        const Cost& c = cols[static_cast<size_t>(j)].cost;
        double busy = 0;
        for (int s = 0; s < kNumStreams; ++s) busy += c.prefill[s] + n_dec * c.decode[s];
        glp_set_obj_coef(lp.get(), j, busy / scale);
    }
    if (!run_simplex(lp.get())) {
        // Keep the first answer's objective; the tie-break is a nicety. Re-solve plainly.
        glp_del_rows(lp.get(), 1, std::array<int, 2>{0, hold}.data());
        for (int j = 1; j <= n_placement; ++j) glp_set_obj_coef(lp.get(), j, 0);
        glp_set_obj_coef(lp.get(), Tp, 1.0 / scale);
        glp_set_obj_coef(lp.get(), Td, n_dec / scale);
        if (!run_simplex(lp.get())) return sol;
    }

    auto val = [&](int j) { return std::clamp(glp_get_col_prim(lp.get(), j), 0.0, 1.0); };
    sol.feasible = true;
    sol.gpu_staging = glp_get_col_prim(lp.get(), bufG) * kGiB;
    sol.dram_staging = glp_get_col_prim(lp.get(), bufD) * kGiB;
    auto used_need = [&](const auto& ids, bool gpu) {
        double m = 0;
        for (int j : ids)
            if (val(j) > 1e-9) m = std::max(m, need(j, gpu) * kGiB);
        return m;
    };
    for (const auto& gc : gcols)
        for (bool gpu : {true, false}) {
            const double n = used_need(gc.w, gpu) + used_need(gc.kv_cols(), gpu);
            double& dst = gpu ? sol.gpu_staging_need : sol.dram_staging_need;
            dst = std::max(dst, n);
        }
    sol.gpu_staging_need = std::max(sol.gpu_staging_need, used_need(out_cols, true));
    sol.dram_staging_need = std::max(sol.dram_staging_need, used_need(out_cols, false));
    sol.prefill_s = glp_get_col_prim(lp.get(), Tp);
    sol.decode_s = glp_get_col_prim(lp.get(), Td);
    sol.objective_s = (sol.prefill_s + n_dec * sol.decode_s) / scale;
    for (size_t gi = 0; gi < groups.size(); ++gi) {
        GroupSolution gs;
        gs.first_layer = groups[gi].first;
        gs.n_layers = groups[gi].n;
        for (int o = 0; o < kNumWeightOptions; ++o) gs.weights[o] = val(gcols[gi].w[o]);
        for (size_t d = 0; d < weight_devices.size(); ++d)
            for (int o = 0; o < kNumKvOptions; ++o) gs.kv[o] += val(gcols[gi].k[d][o]);
        sol.groups.push_back(gs);
    }
    for (int o = 0; o < kNumWeightOptions; ++o) sol.output[o] = val(out_cols[o]);
    if (has_embd)
        for (int o = 0; o < kNumWeightOptions; ++o) sol.embedding[o] = val(embd_cols[o]);
    for (int o = 0; o < kNumHiddenOptions; ++o) sol.hidden[o] = val(hid_cols[o]);
    return sol;
}

}  // namespace strata::planner
