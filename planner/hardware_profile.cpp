#include "planner/hardware_profile.h"

#include <algorithm>
#include <cmath>

#include "planner/json_util.h"
#include "planner/units.h"

namespace strata::planner {

using json_util::get;
using json_util::get_or;
using json_util::json;

const KernelRate* rate_for(const std::vector<KernelRate>& rates, DType t) {
    for (const auto& r : rates)
        if (r.type == t && r.gemv_gbps > 0 && r.gemm_gflops > 0) return &r;
    return nullptr;
}

double CpuProfile::gemv_gbps_for(DType t, double width) const {
    const KernelRate* r = rate_for(rates, t);
    return r ? r->gemv_at(width) : gemv_gbps;
}

namespace {
// Between a rate measured kNarrowCols wide and one kWideCols wide on a log scale, each beyond its end.
double rate_at(double width, double narrow, double wide) {
    if (narrow <= 0 || width <= 0) return wide;
    const double f = std::clamp(std::log2(width / KernelRate::kNarrowCols) /
                                    std::log2(KernelRate::kWideCols / KernelRate::kNarrowCols),
                                0.0, 1.0);
    return narrow + f * (wide - narrow);
}

// The value at `x` on a curve of (x, value) points, x ascending: linear in log2(x) between two
// points, the first point's value before it and the last's after it.
double on_log2_curve(const std::vector<std::pair<double, double>>& c, double x) {
    if (x <= c.front().first) return c.front().second;
    for (size_t i = 1; i < c.size(); ++i) {
        if (x > c[i].first) continue;
        const double lo = std::log2(c[i - 1].first), hi = std::log2(c[i].first);
        const double f = hi > lo ? std::clamp((std::log2(x) - lo) / (hi - lo), 0.0, 1.0) : 1.0;
        return c[i - 1].second + f * (c[i].second - c[i - 1].second);
    }
    return c.back().second;
}
}  // namespace

double KernelRate::gemm_at(double width) const { return rate_at(width, gemm_narrow_gflops, gemm_gflops); }

double KernelRate::gemv_at(double width) const { return rate_at(width, gemv_narrow_gbps, gemv_gbps); }

double KernelRate::gemv_thread_at(double width) const {
    return gemv_thread_gbps > 0 ? rate_at(width, gemv_thread_narrow_gbps, gemv_thread_gbps) : 0;
}

double KernelRate::rows_time_scale(double rows, double width, double max_rows) const {
    if (gemv_gbps <= 0 || rows8_gbps <= 0 || rows > max_rows) return 0;
    const double one = gemv_at(width);
    double eight = one / rate_at(width, rows8_narrow_gbps, rows8_gbps);
    // More rows never take less time (a quick probe's wide figure against a narrow one's).
    const double four = rows4_gbps > 0 ? std::max(1.0, one / rate_at(width, rows4_narrow_gbps, rows4_gbps)) : 0;
    eight = std::max({1.0, four, eight});
    if (rows > kRowsMeasured) {
        // A device's call of up to 16 rows: toward the time measured at 16, else on along the last line.
        const double slope = four > 0 ? (eight - four) / 4 : (eight - 1) / (kRowsMeasured - 1);
        const double sixteen = rows16_gbps > 0 ? std::max(eight, one / rate_at(width, rows16_narrow_gbps, rows16_gbps))
                                               : eight + 8 * slope;
        return eight + (rows - kRowsMeasured) / 8 * (sixteen - eight);
    }
    if (four <= 0) return 1 + (rows - 1) / (kRowsMeasured - 1) * (eight - 1);
    return rows <= 4 ? 1 + (rows - 1) / 3 * (four - 1) : four + (rows - 4) / 4 * (eight - four);
}

double CpuProfile::gemm_gflops_for(DType t, double width) const {
    const KernelRate* r = rate_for(rates, t);
    return r ? r->gemm_at(width) : gemm_gflops;
}

double CpuProfile::pack_gbps_for(DType t) const {
    const KernelRate* r = rate_for(rates, t);
    return r ? r->pack_gbps : 0;
}

double CpuProfile::untile_gbps_for(DType t) const {
    const KernelRate* r = rate_for(rates, t);
    return r ? r->untile_gbps : 0;
}

double CpuProfile::reuse(double bytes) const {
    if (cache_curve.size() < 2 || cache_curve.back().second <= 0) return 1;
    return std::max(1.0, on_log2_curve(cache_curve, bytes) / cache_curve.back().second);
}

std::vector<std::pair<double, double>> DiskProfile::rising_depth_curve() const {
    std::vector<std::pair<double, double>> c = read_depth_curve;
    for (size_t i = 1; i < c.size(); ++i) c[i].second = std::max(c[i].second, c[i - 1].second);
    return c;
}

double DiskProfile::read_gbps_at(double inflight_bytes) const {
    return read_depth_curve.empty() ? read_gbps : on_log2_curve(rising_depth_curve(), inflight_bytes);
}

double DiskProfile::saturating_inflight_bytes(double fraction) const {
    const auto c = rising_depth_curve();
    const double best = c.empty() ? 0 : c.back().second;
    for (const auto& [bytes, gbps] : c)
        if (gbps >= fraction * best) return bytes;
    return 0;
}

double CpuProfile::call_s_for(DType t, double cols) const {
    const KernelRate* r = rate_for(rates, t);
    return r ? r->call_s(static_cast<double>(row_bytes(t, static_cast<int64_t>(cols)))) : 0;
}

double AttentionTileCost::kv_ns_for(DType t) const {
    double f16 = -1, most = 0;
    for (const auto& k : kv_ns) {
        if (k.type == t) return k.ns;
        if (k.type == DType::F16) f16 = k.ns;
        most = std::max(most, k.ns);
    }
    return f16 >= 0 ? f16 : most;
}

double AttentionTileCost::tile_s(DType kv_type, double keys, double rows, double head_dim, bool cold,
                                 double kv_bytes_per_key) const {
    const double convert = keys * kv_ns_for(kv_type) * head_dim * 1e-9;  // each K/V value, as it is read
    const double per_rows = (tile_ns + keys * rows * (row_ns * head_dim + score_ns)) * 1e-9;
    if (!cold || kv_gbps_per_thread <= 0) return convert + per_rows;
    // From DRAM the conversion overlaps the read, the query rows' products follow it (measured
    // over 1 to 8 rows a tile: BENCHMARKS.md, Planner fidelity).
    return std::max(convert, keys * kv_bytes_per_key / (kv_gbps_per_thread * 1e9)) + per_rows;
}

void HardwareProfile::validate() const {
    auto positive = [&](double v, const char* what) {
        if (!(v > 0) || !std::isfinite(v))
            throw UsageError(fmt::format("hardware profile '{}': {} is {}, expected a positive number", name, what, v),
                             "re-run `strata probe` or fix the profile file");
    };
    positive(cpu.gemm_gflops, "cpu.gemm_gflops");
    positive(cpu.gemv_gbps, "cpu.gemv_gbps");
    positive(cpu.attention_gbps, "cpu.attention_gbps");
    positive(cpu.attention_gflops, "cpu.attention_gflops");
    positive(dram.read_gbps, "dram.read_gbps");
    positive(dram.copy_gbps, "dram.copy_gbps");
    positive(nvme.read_gbps, "nvme.read_gbps");
    positive(nvme.write_gbps, "nvme.write_gbps");
    positive(nvme.model_file_scale, "nvme.model_file_scale");
    for (size_t i = 0; i < nvme.read_depth_curve.size(); ++i) {
        positive(nvme.read_depth_curve[i].first, "a depth of nvme.read_depth_curve");
        positive(nvme.read_depth_curve[i].second, "a rate of nvme.read_depth_curve");
        if (i > 0 && nvme.read_depth_curve[i].first <= nvme.read_depth_curve[i - 1].first)
            throw UsageError(fmt::format("hardware profile '{}': nvme.read_depth_curve's depths are not ascending", name),
                             "re-run `strata probe` or fix the profile file");
    }
    if (gpu) {
        positive(gpu->mem_gbps, "gpu.mem_gbps");
        positive(gpu->fp16_tflops, "gpu.fp16_tflops");
        positive(gpu->h2d_gbps, "gpu.h2d_gbps");
        positive(gpu->d2h_gbps, "gpu.d2h_gbps");
    }
}

std::string HardwareProfile::summary() const {
    std::string s;
    if (has_gpu())
        s = fmt::format("{} {} (PCIe {}, {:.1f} GB/s H2D) + ", gpu->name, format_size(gpu->memory_bytes), gpu->pcie,
                        gpu->h2d_gbps);
    else
        s = "no GPU + ";
    s += fmt::format("CPU {} cores + DRAM {} ({:.1f} GB/s) + {} ({:.1f} GB/s read)", cpu.n_cores,
                     format_size(dram.capacity_bytes), dram.read_gbps, nvme.name.empty() ? "disk" : nvme.name,
                     nvme.read_gbps);
    return s;
}

double sim_effective_threads(int sim_threads, int host_threads, int machine_threads) {
    if (sim_threads <= 0) return 0;
    return std::min(sim_threads, std::max(1, machine_threads - host_threads));
}

HardwareProfile HardwareProfile::on_cpu_threads(int threads) const {
    HardwareProfile hw = *this;
    if (threads <= 0 || threads >= cpu.n_threads) return hw;
    const double share = double(threads) / cpu.n_threads;
    for (KernelRate& r : hw.cpu.rates) {
        const double all_gemv = r.gemv_gbps, all_narrow = r.gemv_narrow_gbps;
        // One thread's figures came from the matrix every thread read together: where they read
        // it faster than DRAM reads (part of it was in a cache; a large shared one may hold
        // hundreds of MiB), a pool of fewer threads streams DRAM at them taken down as much. The
        // narrow sweep reads as many bytes: the wide rate tells its share too.
        const double from_dram = dram.read_gbps > 0 && all_gemv > dram.read_gbps ? dram.read_gbps / all_gemv : 1;
        const double thread = r.gemv_thread_gbps * from_dram, thread_narrow = r.gemv_thread_narrow_gbps * from_dram;
        r.gemv_gbps *= share, r.gemm_gflops *= share, r.pack_gbps *= share, r.gemm_narrow_gflops *= share;
        r.untile_gbps *= share;
        r.gemv_narrow_gbps *= share;
        if (r.gemv_thread_gbps > 0) r.gemv_gbps = std::min(all_gemv, threads * thread);
        if (r.gemv_thread_narrow_gbps > 0) r.gemv_narrow_gbps = std::min(all_narrow, threads * thread_narrow);
        if (const KernelRate* alone = sim ? rate_for(sim->rates, r.type) : nullptr) {
            const double per_thread = double(threads) / std::max(1, sim->n_threads);
            if (r.gemv_thread_gbps <= 0) r.gemv_gbps = std::min(r.gemv_gbps, alone->gemv_gbps * per_thread);
            r.gemm_gflops = std::min(r.gemm_gflops, alone->gemm_gflops * per_thread);
            if (alone->gemm_narrow_gflops > 0)
                r.gemm_narrow_gflops = std::min(r.gemm_narrow_gflops, alone->gemm_narrow_gflops * per_thread);
        }
        // Calls of 4 and 8 tokens keep their time over one token's as measured.
        if (all_gemv > 0) r.rows4_gbps *= r.gemv_gbps / all_gemv, r.rows8_gbps *= r.gemv_gbps / all_gemv;
        if (all_narrow > 0)
            r.rows4_narrow_gbps *= r.gemv_narrow_gbps / all_narrow, r.rows8_narrow_gbps *= r.gemv_narrow_gbps / all_narrow;
    }
    hw.cpu.gemv_gbps *= share, hw.cpu.gemm_gflops *= share;
    hw.cpu.n_threads = threads;
    hw.notes.push_back(fmt::format("cpu: on {} of its {} threads", threads, cpu.n_threads));
    return hw;
}

namespace {

json rates_json(const std::vector<KernelRate>& rates) {
    json out = json::array();
    for (const auto& r : rates)
        out.push_back({{"type", dtype_name(r.type)}, {"gemv_gbps", r.gemv_gbps}, {"gemm_gflops", r.gemm_gflops},
                       {"pack_gbps", r.pack_gbps}, {"call_us", r.call_us}, {"call_ns_per_row_byte", r.call_ns_per_row_byte},
                       {"gemm_narrow_gflops", r.gemm_narrow_gflops}, {"rows8_gbps", r.rows8_gbps},
                       {"gemv_thread_gbps", r.gemv_thread_gbps}, {"gemv_narrow_gbps", r.gemv_narrow_gbps},
                       {"gemv_thread_narrow_gbps", r.gemv_thread_narrow_gbps}, {"rows4_gbps", r.rows4_gbps},
                       {"rows4_narrow_gbps", r.rows4_narrow_gbps}, {"rows8_narrow_gbps", r.rows8_narrow_gbps},
                       {"rows16_gbps", r.rows16_gbps}, {"rows16_narrow_gbps", r.rows16_narrow_gbps},
                       {"untile_gbps", r.untile_gbps}});
    return out;
}

std::vector<KernelRate> rates_from_json(const json& j, std::string_view where) {
    std::vector<KernelRate> rates;
    for (const auto& r : j) {
        const auto tname = get<std::string>(r, where, "type");
        const auto t = dtype_from_name(tname);
        if (!t) throw UsageError(fmt::format("hardware profile: {} type '{}' is unknown", where, tname));
        rates.push_back({*t, get<double>(r, where, "gemv_gbps"), get<double>(r, where, "gemm_gflops"),
                         get_or<double>(r, where, "pack_gbps", 0), get_or<double>(r, where, "call_us", 0),
                         get_or<double>(r, where, "call_ns_per_row_byte", 0), get_or<double>(r, where, "gemm_narrow_gflops", 0),
                         get_or<double>(r, where, "rows8_gbps", 0), get_or<double>(r, where, "gemv_thread_gbps", 0),
                         get_or<double>(r, where, "gemv_narrow_gbps", 0), get_or<double>(r, where, "gemv_thread_narrow_gbps", 0),
                         get_or<double>(r, where, "rows4_gbps", 0), get_or<double>(r, where, "rows4_narrow_gbps", 0),
                         get_or<double>(r, where, "rows8_narrow_gbps", 0), get_or<double>(r, where, "rows16_gbps", 0),
                         get_or<double>(r, where, "rows16_narrow_gbps", 0), get_or<double>(r, where, "untile_gbps", 0)});
    }
    return rates;
}

json ops_json(const DeviceOps& o) {
    json points = json::array();
    for (const AttentionPoint& a : o.attention) points.push_back({a.keys, a.us});
    // op_overhead_us keeps the name profiles before the device's own measurements used.
    return {{"n_threads", o.n_threads}, {"op_overhead_us", o.op_overhead_us}, {"graph_op_us", o.graph_op_us},
            {"handoff_us", o.handoff_us}, {"round_trip_us", o.round_trip_us}, {"h2d_gbps", o.h2d_gbps}, {"d2h_gbps", o.d2h_gbps},
            {"attention", points},        {"rates", rates_json(o.rates)}};
}

DeviceOps ops_from_json(const json& m, std::string_view where) {
    DeviceOps o;
    o.n_threads = get_or<int>(m, where, "n_threads", 0);
    o.op_overhead_us = get<double>(m, where, "op_overhead_us");
    o.graph_op_us = get_or<double>(m, where, "graph_op_us", 0);
    o.handoff_us = get_or<double>(m, where, "handoff_us", 0);
    o.round_trip_us = get_or<double>(m, where, "round_trip_us", 0);
    o.h2d_gbps = get_or<double>(m, where, "h2d_gbps", 0);
    o.d2h_gbps = get_or<double>(m, where, "d2h_gbps", 0);
    for (const auto& [keys, us] : get_or<std::vector<std::pair<double, double>>>(m, where, "attention", {}))
        o.attention.push_back({keys, us});
    if (m.contains("rates")) o.rates = rates_from_json(m.at("rates"), fmt::format("{}.rates[]", where));
    return o;
}

}  // namespace

double DeviceOps::attention_s(double kv_bytes) const {
    if (attention.empty()) return 0;
    // Between two points the time is linear in the bytes read; below the first, its time per
    // byte; beyond the last, the last two points' slope.
    auto bytes = [](const AttentionPoint& a) { return a.keys * kAttentionKvBytesPerKey; };
    const AttentionPoint* lo = &attention.front();
    if (attention.size() == 1 || kv_bytes <= bytes(*lo)) return lo->us * 1e-6 * kv_bytes / std::max(1.0, bytes(*lo));
    size_t i = 1;
    while (i + 1 < attention.size() && kv_bytes > bytes(attention[i])) ++i;
    const AttentionPoint &a = attention[i - 1], &b = attention[i];
    const double f = (kv_bytes - bytes(a)) / std::max(1.0, bytes(b) - bytes(a));
    return std::max(0.0, a.us + f * (b.us - a.us)) * 1e-6;
}

std::string HardwareProfile::to_json() const {
    const json rates = rates_json(cpu.rates);
    json j = {
        {"strata_hardware_profile", 1},
        {"name", name},
        {"source", source},
        {"probe_version", probe_version},
        {"cpu",
         {{"name", cpu.name}, {"n_cores", cpu.n_cores}, {"n_threads", cpu.n_threads}, {"n_numa", cpu.n_numa},
          {"l1d_bytes", cpu.l1d_bytes}, {"l2_bytes", cpu.l2_bytes}, {"l3_bytes", cpu.l3_bytes},
          {"cache_bytes", cpu.cache_bytes}, {"cache_curve", cpu.cache_curve},
          {"gemm_gflops", cpu.gemm_gflops}, {"gemv_gbps", cpu.gemv_gbps}, {"attention_gbps", cpu.attention_gbps},
          {"attention_gflops", cpu.attention_gflops}, {"layer_overhead_us", cpu.layer_overhead_us},
          {"vector_ns_per_value", cpu.vector.ns_per_value},
          {"vector_ns_per_token", cpu.vector.ns_per_token}, {"loop_us", cpu.loop_us}, {"attention_tile", nullptr}, {"rates", rates}}},
        {"dram",
         {{"kind", dram.kind}, {"capacity_bytes", dram.capacity_bytes}, {"read_gbps", dram.read_gbps},
          {"copy_gbps", dram.copy_gbps}}},
        {"nvme",
         {{"name", nvme.name}, {"path", nvme.path}, {"capacity_bytes", nvme.capacity_bytes},
          {"read_gbps", nvme.read_gbps}, {"write_gbps", nvme.write_gbps}, {"read_depth_curve", nvme.read_depth_curve}}},
        {"gpu", nullptr},
        {"sim", nullptr},
        {"notes", notes},
    };
    if (const auto& a = cpu.attention_tile) {
        json kv = json::object();
        for (const auto& k : a->kv_ns) kv[std::string(dtype_name(k.type))] = k.ns;
        j["cpu"]["attention_tile"] = {{"kv_ns", kv}, {"row_ns", a->row_ns}, {"score_ns", a->score_ns},
                                       {"kv_gbps_per_thread", a->kv_gbps_per_thread}, {"tile_ns", a->tile_ns}};
    }
    if (sim) j["sim"] = ops_json(*sim);
    if (gpu)
        j["gpu"] = {{"name", gpu->name}, {"memory_bytes", gpu->memory_bytes}, {"mem_gbps", gpu->mem_gbps},
                    {"fp16_tflops", gpu->fp16_tflops}, {"h2d_gbps", gpu->h2d_gbps}, {"d2h_gbps", gpu->d2h_gbps},
                    {"pcie", gpu->pcie}, {"launch_overhead_us", gpu->launch_overhead_us}, {"sim_threads", gpu->sim_threads},
                    {"handoff_us", gpu->handoff_us}, {"ops", gpu->ops ? ops_json(*gpu->ops) : json(nullptr)}};
    return j.dump(2);
}

HardwareProfile HardwareProfile::from_json(std::string_view text) {
    const json j = json_util::parse(text, "hardware profile");
    if (!j.is_object() || !j.contains("strata_hardware_profile"))
        throw UsageError("the file is not a Strata hardware profile (no 'strata_hardware_profile' field)",
                         "make one with `strata probe -o FILE`");
    HardwareProfile p;
    p.name = get_or<std::string>(j, "profile", "name", "");
    p.source = get_or<std::string>(j, "profile", "source", "file");
    p.probe_version = get_or<int>(j, "profile", "probe_version", 0);
    const json& c = json_util::object(j, "profile", "cpu");
    p.cpu.name = get_or<std::string>(c, "cpu", "name", "");
    p.cpu.n_cores = get<int>(c, "cpu", "n_cores");
    p.cpu.n_threads = get_or<int>(c, "cpu", "n_threads", p.cpu.n_cores);
    p.cpu.n_numa = get_or<int>(c, "cpu", "n_numa", 1);
    p.cpu.l1d_bytes = get_or<uint64_t>(c, "cpu", "l1d_bytes", 0);
    p.cpu.l2_bytes = get_or<uint64_t>(c, "cpu", "l2_bytes", 0);
    p.cpu.l3_bytes = get_or<uint64_t>(c, "cpu", "l3_bytes", 0);
    p.cpu.cache_bytes = get_or<uint64_t>(c, "cpu", "cache_bytes", 0);
    p.cpu.cache_curve = get_or<std::vector<std::pair<double, double>>>(c, "cpu", "cache_curve", {});
    p.cpu.gemm_gflops = get<double>(c, "cpu", "gemm_gflops");
    p.cpu.gemv_gbps = get<double>(c, "cpu", "gemv_gbps");
    p.cpu.attention_gbps = get<double>(c, "cpu", "attention_gbps");
    p.cpu.attention_gflops = get<double>(c, "cpu", "attention_gflops");
    p.cpu.layer_overhead_us = get_or<double>(c, "cpu", "layer_overhead_us", 15);
    p.cpu.vector.ns_per_value = get_or<double>(c, "cpu", "vector_ns_per_value", 0);
    p.cpu.vector.ns_per_token = get_or<double>(c, "cpu", "vector_ns_per_token", 0);
    p.cpu.loop_us = get_or<double>(c, "cpu", "loop_us", 0);
    if (c.contains("attention_tile") && !c.at("attention_tile").is_null()) {
        const json& a = c.at("attention_tile");
        AttentionTileCost t;
        t.row_ns = get<double>(a, "cpu.attention_tile", "row_ns");
        t.score_ns = get<double>(a, "cpu.attention_tile", "score_ns");
        t.kv_gbps_per_thread = get_or<double>(a, "cpu.attention_tile", "kv_gbps_per_thread", 0);
        t.tile_ns = get_or<double>(a, "cpu.attention_tile", "tile_ns", 0);
        for (const auto& [name, ns] : json_util::object(a, "cpu.attention_tile", "kv_ns").items()) {
            const auto type = dtype_from_name(name);
            if (!type || !ns.is_number())
                throw UsageError(fmt::format("cpu.attention_tile.kv_ns: '{}' is not a type with a number", name),
                                 "make the profile again with `strata probe`");
            t.kv_ns.push_back({*type, ns.get<double>()});
        }
        p.cpu.attention_tile = t;
    }
    if (c.contains("rates")) p.cpu.rates = rates_from_json(c.at("rates"), "cpu.rates[]");
    if (j.contains("sim") && !j.at("sim").is_null()) p.sim = ops_from_json(j.at("sim"), "sim");
    const json& d = json_util::object(j, "profile", "dram");
    p.dram.kind = get_or<std::string>(d, "dram", "kind", "");
    p.dram.capacity_bytes = get<uint64_t>(d, "dram", "capacity_bytes");
    p.dram.read_gbps = get<double>(d, "dram", "read_gbps");
    p.dram.copy_gbps = get<double>(d, "dram", "copy_gbps");
    const json& n = json_util::object(j, "profile", "nvme");
    p.nvme.name = get_or<std::string>(n, "nvme", "name", "");
    p.nvme.path = get_or<std::string>(n, "nvme", "path", "");
    p.nvme.capacity_bytes = get<uint64_t>(n, "nvme", "capacity_bytes");
    p.nvme.read_gbps = get<double>(n, "nvme", "read_gbps");
    p.nvme.write_gbps = get<double>(n, "nvme", "write_gbps");
    p.nvme.read_depth_curve = get_or<std::vector<std::pair<double, double>>>(n, "nvme", "read_depth_curve", {});
    if (j.contains("gpu") && !j.at("gpu").is_null()) {
        const json& g = j.at("gpu");
        GpuProfile gp;
        gp.name = get<std::string>(g, "gpu", "name");
        gp.memory_bytes = get<uint64_t>(g, "gpu", "memory_bytes");
        gp.mem_gbps = get<double>(g, "gpu", "mem_gbps");
        gp.fp16_tflops = get<double>(g, "gpu", "fp16_tflops");
        gp.h2d_gbps = get<double>(g, "gpu", "h2d_gbps");
        gp.d2h_gbps = get<double>(g, "gpu", "d2h_gbps");
        gp.pcie = get_or<std::string>(g, "gpu", "pcie", "");
        gp.launch_overhead_us = get_or<double>(g, "gpu", "launch_overhead_us", 30);
        gp.sim_threads = get_or<int>(g, "gpu", "sim_threads", 0);
        gp.handoff_us = get_or<double>(g, "gpu", "handoff_us", 0);
        if (g.contains("ops") && !g.at("ops").is_null()) gp.ops = ops_from_json(g.at("ops"), "gpu.ops");
        p.gpu = gp;
    }
    p.notes = get_or<std::vector<std::string>>(j, "profile", "notes", {});
    p.validate();
    return p;
}

}  // namespace strata::planner
