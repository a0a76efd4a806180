#include "planner/catalog.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "planner/json_util.h"
#include "planner/units.h"

namespace strata::planner {

namespace catalog_data {
extern const std::string_view kCatalog_hardware;
extern const std::string_view kCatalog_models;
}  // namespace catalog_data

using json_util::get;
using json_util::get_or;
using json_util::json;

namespace {

std::string lower(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
    return out;
}

// Sizes are written as "memory_gib" (binary, as GPU memory is) or "memory_gb" (decimal, as
// disks and HBM3e parts are sold).
uint64_t size_field(const json& j, std::string_view path, const std::string& stem) {
    if (j.contains(stem + "_gib")) return static_cast<uint64_t>(get<double>(j, path, (stem + "_gib").c_str()) * kGiB);
    if (j.contains(stem + "_gb")) return static_cast<uint64_t>(get<double>(j, path, (stem + "_gb").c_str()) * kGB);
    return 0;
}

template <class T>
const T* find_by_name(const std::vector<T>& v, std::string_view name) {
    const std::string n = lower(name);
    for (const auto& e : v)
        if (lower(e.name) == n) return &e;
    return nullptr;
}

template <class T>
std::string names_of(const std::vector<T>& v) {
    std::string s;
    for (const auto& e : v) s += (s.empty() ? "" : ", ") + e.name;
    return s;
}

}  // namespace

Catalog Catalog::parse(std::string_view hardware_json, std::string_view models_json) {
    Catalog c;
    const json h = json_util::parse(hardware_json, "hardware catalog");
    if (h.contains("efficiency")) {
        const json& e = h.at("efficiency");
        c.efficiency = {get<double>(e, "efficiency", "gpu_gemm"), get<double>(e, "efficiency", "gpu_mem"),
                        get<double>(e, "efficiency", "pcie"),     get<double>(e, "efficiency", "dram_read"),
                        get<double>(e, "efficiency", "nvme"),     get<double>(e, "efficiency", "cpu_gemm")};
    }
    for (const auto& g : h.value("gpus", json::array())) {
        GpuEntry e;
        e.name = get<std::string>(g, "gpus[]", "name");
        const std::string path = "gpu " + e.name;
        e.aliases = get_or<std::vector<std::string>>(g, path, "aliases", {});
        e.memory_bytes = size_field(g, path, "memory");
        e.mem_gbps = get<double>(g, path, "mem_gbps");
        e.fp16_tflops = get<double>(g, path, "fp16_tflops");
        e.pcie = get<std::string>(g, path, "pcie");
        e.source = get<std::string>(g, path, "source");
        if (e.memory_bytes == 0) throw UsageError(fmt::format("catalog {}: no memory size", path));
        c.gpus.push_back(std::move(e));
    }
    for (const auto& p : h.value("pcie", json::array()))
        c.pcie.push_back({get<std::string>(p, "pcie[]", "name"), get<double>(p, "pcie[]", "x16_gbps"),
                          get<std::string>(p, "pcie[]", "source")});
    for (const auto& n : h.value("nvme", json::array()))
        c.nvme.push_back({get<std::string>(n, "nvme[]", "name"), get<double>(n, "nvme[]", "read_gbps"),
                          get<double>(n, "nvme[]", "write_gbps"), size_field(n, "nvme[]", "capacity"),
                          get_or<std::string>(n, "nvme[]", "example", ""), get<std::string>(n, "nvme[]", "source")});
    for (const auto& d : h.value("dram", json::array()))
        c.dram.push_back({get<std::string>(d, "dram[]", "name"), get<double>(d, "dram[]", "channel_gbps"),
                          get<std::string>(d, "dram[]", "source")});
    for (const auto& p : h.value("cpus", json::array()))
        c.cpus.push_back({get<std::string>(p, "cpus[]", "name"), get<int>(p, "cpus[]", "cores"),
                          get<double>(p, "cpus[]", "ghz"), get<double>(p, "cpus[]", "fp32_flops_per_cycle"),
                          get<double>(p, "cpus[]", "per_core_gemv_gbps"), get<std::string>(p, "cpus[]", "dram"),
                          get<int>(p, "cpus[]", "channels"), get<std::string>(p, "cpus[]", "source")});
    for (const auto& s : h.value("systems", json::array())) {
        SystemEntry e;
        e.name = get<std::string>(s, "systems[]", "name");
        e.gpu = get<std::string>(s, e.name, "gpu");
        e.cpu = get<std::string>(s, e.name, "cpu");
        e.gpu_memory_bytes = size_field(s, e.name, "gpu_memory");
        e.dram_bytes = size_field(s, e.name, "dram");
        e.nvme_bytes = size_field(s, e.name, "nvme");
        e.h2d_gbps = get_or<double>(s, e.name, "h2d_gbps", 0);
        e.d2h_gbps = get_or<double>(s, e.name, "d2h_gbps", 0);
        e.nvme_read_gbps = get_or<double>(s, e.name, "nvme_read_gbps", 0);
        e.nvme_write_gbps = get_or<double>(s, e.name, "nvme_write_gbps", 0);
        e.gpu_fp16_tflops = get_or<double>(s, e.name, "gpu_fp16_tflops", 0);
        e.cpu_attention_gflops = get_or<double>(s, e.name, "cpu_attention_gflops", 0);
        e.dram_read_gbps = get_or<double>(s, e.name, "dram_read_gbps", 0);
        e.source = get<std::string>(s, e.name, "source");
        c.systems.push_back(std::move(e));
    }
    const json m = json_util::parse(models_json, "model catalog");
    for (const auto& e : m.value("models", json::array())) {
        ModelEntry me;
        me.name = get<std::string>(e, "models[]", "name");
        me.family = get<std::string>(e, me.name, "family");
        me.n_embd = get<int32_t>(e, me.name, "n_embd");
        me.n_layer = get<int32_t>(e, me.name, "n_layer");
        me.n_head = get<int32_t>(e, me.name, "n_head");
        me.n_head_kv = get<int32_t>(e, me.name, "n_head_kv");
        me.n_ff = get<int32_t>(e, me.name, "n_ff");
        me.n_vocab = get<int32_t>(e, me.name, "n_vocab");
        me.n_ctx_train = get<int32_t>(e, me.name, "n_ctx_train");
        me.n_expert = get_or<int32_t>(e, me.name, "n_expert", 0);
        me.n_expert_used = get_or<int32_t>(e, me.name, "n_expert_used", 0);
        me.tied = get<bool>(e, me.name, "tied");
        me.source = get<std::string>(e, me.name, "source");
        me.head_dim = get_or<int32_t>(e, me.name, "head_dim", 0);
        for (auto [key, field] : {std::pair{"n_expert", &me.n_expert}, {"n_expert_used", &me.n_expert_used},
                                  {"n_ff_exp", &me.n_ff_exp}, {"n_expert_shared", &me.n_expert_shared},
                                  {"n_dense_lead", &me.n_dense_lead}, {"q_lora_rank", &me.q_lora_rank},
                                  {"kv_lora_rank", &me.kv_lora_rank}, {"qk_nope", &me.qk_nope}, {"qk_rope", &me.qk_rope},
                                  {"v_head_dim", &me.v_head_dim}, {"n_swa", &me.n_swa}})
            *field = get_or<int32_t>(e, me.name, key, 0);
        me.weight_type = get_or<std::string>(e, me.name, "weight_type", "");
        me.expert_type = get_or<std::string>(e, me.name, "expert_type", "");
        if (me.n_embd <= 0 || me.n_layer <= 0 || me.n_head <= 0 || me.n_head_kv <= 0 ||
            (me.head_dim == 0 && me.n_embd % me.n_head != 0) || (me.n_expert > 0 && me.n_expert_used <= 0) ||
            me.n_expert_used > me.n_expert || me.n_dense_lead > me.n_layer)
            throw UsageError(fmt::format("catalog model {}: inconsistent sizes", me.name));
        if (me.n_expert < 0 || me.n_expert_used < 0 || me.n_expert_used > me.n_expert || (me.n_expert > 0) != (me.n_expert_used > 0))
            throw UsageError(fmt::format("catalog model {}: n_expert_used {} of n_expert {}", me.name, me.n_expert_used, me.n_expert));
        c.models.push_back(std::move(me));
    }
    return c;
}

const Catalog& Catalog::builtin() {
    static const Catalog c = parse(catalog_data::kCatalog_hardware, catalog_data::kCatalog_models);
    return c;
}

const GpuEntry* Catalog::find_gpu(std::string_view name) const {
    const std::string n = lower(name);
    for (const auto& g : gpus) {
        if (lower(g.name) == n) return &g;
        for (const auto& a : g.aliases)
            if (lower(a) == n) return &g;
    }
    return nullptr;
}

const GpuEntry* Catalog::match_gpu_device(std::string_view device_name) const {
    // Longest alias first, so "a100 80gb" wins over "a100" for an 80 GB part.
    const std::string d = lower(device_name);
    const GpuEntry* best = nullptr;
    size_t best_len = 0;
    for (const auto& g : gpus)
        for (const auto& a : g.aliases)
            if (a.size() > best_len && d.find(lower(a)) != std::string::npos) best = &g, best_len = a.size();
    return best;
}

const PcieEntry* Catalog::find_pcie(std::string_view n) const { return find_by_name(pcie, n); }
const NvmeEntry* Catalog::find_nvme(std::string_view n) const { return find_by_name(nvme, n); }
const DramEntry* Catalog::find_dram(std::string_view n) const { return find_by_name(dram, n); }
const CpuEntry* Catalog::find_cpu(std::string_view n) const { return find_by_name(cpus, n); }
const SystemEntry* Catalog::find_system(std::string_view n) const { return find_by_name(systems, n); }
const ModelEntry* Catalog::find_model(std::string_view n) const { return find_by_name(models, n); }
std::string Catalog::gpu_names() const { return names_of(gpus); }
std::string Catalog::model_names() const { return names_of(models); }

namespace {
template <class T>
const T* must(const T* e, std::string_view what, std::string_view name, const std::string& known) {
    if (!e) throw UsageError(fmt::format("unknown {} '{}'", what, name), fmt::format("known: {}", known));
    return e;
}
// A link of generation `pe` priced as the catalog prices links: x16 at the catalog's efficiency, each way.
double link_gbps(const PcieEntry& pe, const Efficiency& eff) { return pe.x16_gbps * eff.pcie; }
}  // namespace

HardwareProfile profile_from_catalog(const DryRunSpec& spec, const Catalog& cat) {
    const Efficiency& eff = cat.efficiency;
    const SystemEntry* sys = spec.system.empty() ? nullptr : must(cat.find_system(spec.system), "system", spec.system, names_of(cat.systems));
    HardwareProfile p;
    p.source = "catalog";
    auto from_sys = [&](double sys_value, double fallback) { return sys && sys_value > 0 ? sys_value : fallback; };
    // A system's measured figures belong to its own parts: a CPU, DRAM, GPU or link named in
    // their place is priced from its own catalog entry, not the system's measurements.
    const auto same = [](const std::string& given, const std::string& own) { return given.empty() || lower(given) == lower(own); };
    const bool own_cpu = sys && same(spec.cpu, sys->cpu) && spec.dram_kind.empty() && spec.dram_channels == 0;
    const bool own_gpu = sys && same(spec.gpu, sys->gpu);
    const bool own_link = own_gpu && spec.pcie.empty();

    // CPU and DRAM.
    const std::string cpu_name = !spec.cpu.empty() ? spec.cpu : sys ? sys->cpu : "ryzen9-7950x";
    const CpuEntry* cpu = must(cat.find_cpu(cpu_name), "CPU", cpu_name, names_of(cat.cpus));
    const std::string dram_name = spec.dram_kind.empty() ? cpu->dram : spec.dram_kind;
    const DramEntry* dram = must(cat.find_dram(dram_name), "DRAM kind", dram_name, names_of(cat.dram));
    const int channels = spec.dram_channels > 0 ? spec.dram_channels : cpu->channels;
    p.dram.kind = fmt::format("{} x{}", dram->name, channels);
    p.dram.capacity_bytes = spec.dram ? *spec.dram : sys && sys->dram_bytes ? sys->dram_bytes : static_cast<uint64_t>(64 * kGiB);
    p.dram.read_gbps = from_sys(own_cpu ? sys->dram_read_gbps : 0, channels * dram->channel_gbps * eff.dram_read);
    p.dram.copy_gbps = p.dram.read_gbps / 2;  // a copy reads and writes each byte
    const double peak_gflops = cpu->cores * cpu->ghz * cpu->fp32_flops_per_cycle;
    p.cpu.name = cpu->name;
    p.cpu.n_cores = p.cpu.n_threads = cpu->cores;
    p.cpu.gemm_gflops = peak_gflops * eff.cpu_gemm;
    // Decode GEMV and attention stream from DRAM: the cores' rate, capped by the channels.
    p.cpu.gemv_gbps = std::min(p.dram.read_gbps, cpu->cores * cpu->per_core_gemv_gbps);
    p.cpu.attention_gbps = p.cpu.gemv_gbps;
    p.cpu.attention_gflops = from_sys(own_cpu ? sys->cpu_attention_gflops : 0, peak_gflops * eff.cpu_gemm / 2);
    p.notes.push_back("cpu: " + cpu->source);
    p.notes.push_back("dram: " + dram->source);

    // GPU and its link.
    const std::string gpu_name = !spec.gpu.empty() ? spec.gpu : sys ? sys->gpu : "none";
    if (lower(gpu_name) != "none") {
        const GpuEntry* g = must(cat.find_gpu(gpu_name), "GPU", gpu_name, cat.gpu_names() + ", none");
        const std::string link = spec.pcie.empty() ? g->pcie : spec.pcie;
        const PcieEntry* pe = must(cat.find_pcie(link), "PCIe generation", link, names_of(cat.pcie));
        GpuProfile gp;
        gp.name = g->name;
        gp.memory_bytes = spec.gpu_memory ? *spec.gpu_memory : own_gpu && sys->gpu_memory_bytes ? sys->gpu_memory_bytes : g->memory_bytes;
        gp.mem_gbps = g->mem_gbps * eff.gpu_mem;
        gp.fp16_tflops = from_sys(own_gpu ? sys->gpu_fp16_tflops : 0, g->fp16_tflops * eff.gpu_gemm);
        gp.pcie = pe->name + " x16";
        gp.h2d_gbps = from_sys(own_link ? sys->h2d_gbps : 0, link_gbps(*pe, eff));
        gp.d2h_gbps = from_sys(own_link ? sys->d2h_gbps : 0, link_gbps(*pe, eff));
        p.gpu = gp;
        p.notes.push_back("gpu: " + g->source);
        p.notes.push_back("pcie: " + pe->source);
    }

    // NVMe.
    const std::string nvme_name = spec.nvme.empty() ? "gen4" : spec.nvme;
    const NvmeEntry* n = must(cat.find_nvme(nvme_name), "NVMe generation", nvme_name, names_of(cat.nvme));
    // A system's disk is described by its own (measured or fitted) rates, not a generation's.
    const bool own_disk = sys && spec.nvme.empty();
    p.nvme.name = own_disk && sys->nvme_read_gbps > 0 ? "SSD of " + sys->name : "NVMe " + n->name;
    p.nvme.capacity_bytes = spec.nvme_capacity ? *spec.nvme_capacity : own_disk && sys->nvme_bytes ? sys->nvme_bytes : n->capacity_bytes;
    p.nvme.read_gbps = from_sys(own_disk ? sys->nvme_read_gbps : 0, n->read_gbps * eff.nvme);
    p.nvme.write_gbps = from_sys(own_disk ? sys->nvme_write_gbps : 0, n->write_gbps * eff.nvme);
    if (spec.nvme_read_gbps) {
        p.nvme.write_gbps *= *spec.nvme_read_gbps / p.nvme.read_gbps;
        p.nvme.read_gbps = *spec.nvme_read_gbps;
    }
    p.notes.push_back("nvme: " + n->source);
    if (sys) p.notes.push_back("system: " + sys->source);

    p.name = sys ? sys->name : fmt::format("{} + {} {} + NVMe {}", p.gpu ? p.gpu->name : "no GPU", format_size(p.dram.capacity_bytes), p.dram.kind, n->name);
    p.validate();
    return p;
}

HardwareProfile with_catalog_parts(HardwareProfile base, const DryRunSpec& parts, const Catalog& cat) {
    if (!parts.system.empty()) throw UsageError("a catalog machine replaces every part, not some", "leave out the profile or the machine");
    if (!parts.dram_kind.empty() && parts.cpu.empty())
        throw UsageError(fmt::format("--dram-kind {} needs the CPU whose memory channels it fills", parts.dram_kind),
                         "name the CPU too (--cpu), or plan a catalog machine (--machine)");
    const HardwareProfile named = profile_from_catalog(parts, cat);  // every part, the unnamed ones the catalog's defaults
    std::vector<std::string> swapped;
    const auto note = [&](std::string_view part) {
        for (const std::string& n : named.notes)
            if (n.rfind(std::string(part) + ": ", 0) == 0) base.notes.push_back(n);
    };
    if (!parts.gpu.empty()) {
        base.gpu = named.gpu;  // none, or the catalog's card with its link and memory
        base.sim.reset();
        swapped.push_back(named.gpu ? named.gpu->name : "no GPU");
        note("gpu"), note("pcie");
    } else if (!parts.pcie.empty()) {
        if (!base.gpu) throw UsageError(fmt::format("--pcie {} names a GPU's link, and this machine has no GPU", parts.pcie),
                                        "name one with --gpu");
        const PcieEntry* pe = cat.find_pcie(parts.pcie);
        if (!pe) throw UsageError(fmt::format("'{}' is not a catalog PCIe generation", parts.pcie), "use gen3, gen4 or gen5");
        base.gpu->pcie = pe->name + " x16";
        base.gpu->h2d_gbps = base.gpu->d2h_gbps = link_gbps(*pe, cat.efficiency);
        if (base.gpu->ops) base.gpu->ops->h2d_gbps = base.gpu->ops->d2h_gbps = base.gpu->h2d_gbps;
        swapped.push_back("PCIe " + pe->name);
        note("pcie");
    }
    if (!parts.cpu.empty()) {
        const uint64_t capacity = base.dram.capacity_bytes;
        base.cpu = named.cpu;
        base.dram = named.dram;
        base.dram.capacity_bytes = parts.dram ? *parts.dram : capacity;
        swapped.push_back(named.cpu.name + " with " + named.dram.kind);
        note("cpu"), note("dram");
    }
    if (!parts.nvme.empty()) {
        const uint64_t capacity = base.nvme.capacity_bytes;
        base.nvme = named.nvme;
        base.nvme.capacity_bytes = parts.nvme_capacity ? *parts.nvme_capacity : capacity;
        swapped.push_back(named.nvme.name);
        note("nvme");
    }
    base.source = fmt::format("{}, with {} from the catalog", base.source, fmt::join(swapped, ", "));
    base.validate();
    return base;
}

}  // namespace strata::planner
