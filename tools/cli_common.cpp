#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <random>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/bytes.h"
#include "core/error.h"
#include "core/log.h"
#include "cpu/kv_format.h"
#include "cpu/thread_pool.h"
#include "runtime/grammar/json_schema_grammar.h"
#include "planner/plan_report.h"
#include "planner/speculation.h"
#include "planner/units.h"
#include "runtime/place/op_offload_choice.h"
#include "runtime/place/placement.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/spec/draft_engine.h"
#include "runtime/spec/model_drafter.h"
#include "runtime/spec/self_drafter.h"
#include "storage/budget.h"
#include "tools/cli_options.h"
#include "tools/openai/api_error.h"
#include "tools/openai/json_fields.h"

namespace strata::cli {

namespace {
// Device flags given to a run the device takes no part in (--device cpu, or --gpu-mem 0): said,
// not silently dropped.
void warn_device_flags_unused(const ModelOptions& m, const runtime::GpuRequest& gpu) {
    if (gpu.device != runtime::DeviceKind::Cpu && !(gpu.gpu_mem && *gpu.gpu_mem == 0)) return;
    std::vector<std::string> unused;
    if (m.attention != "auto") unused.push_back("--attention " + m.attention);
    if (m.op_offload != "auto") unused.push_back("--op-offload " + m.op_offload);
    if (!m.sim_shrink.empty()) unused.push_back("--sim-shrink-after " + m.sim_shrink);
    if (m.sim_threads > 0) unused.push_back(fmt::format("--sim-threads {}", m.sim_threads));
    if (!unused.empty())
        STRATA_LOG_WARN("{} {} no effect: the run uses no device ({})", fmt::join(unused, ", "), unused.size() == 1 ? "has" : "have",
                        gpu.device == runtime::DeviceKind::Cpu ? "--device cpu" : "--gpu-mem 0");
}

// `load()`, its errors named as --draft-model's where one is given.
template <class Load>
auto naming_draft_model(const std::string& draft_model, Load&& load) {
    try {
        return load();
    } catch (const UsageError& err) {
        if (draft_model.empty()) throw;
        throw UsageError(fmt::format("--draft-model {}: {}", draft_model, err.what()), err.hint());
    } catch (const Error& err) {
        if (draft_model.empty()) throw;
        // The file's own errors (missing, not GGUF) name -m's remedies: this one is --draft-model's.
        throw UsageError(fmt::format("--draft-model {}: {}", draft_model, err.what()),
                         "give a GGUF model with the target's vocabulary, or leave --draft-model out");
    }
}

}  // namespace

runtime::EngineOptions ModelOptions::engine() const {
    runtime::EngineOptions e;
    e.model = model;
    e.n_threads = threads;
    // Workers spin between matmuls: far more of them than hardware threads crawl (-t 1000 took
    // 24 s for 8 tokens on 2 cores), so that is refused; a few more are allowed, with a warning.
    if (const int most = 4 * cpu::default_thread_count(); threads > most)
        throw UsageError(fmt::format("-t {} is far more threads than this machine's {}", threads, cpu::default_thread_count()),
                         fmt::format("give at most {} (leave -t out for one per hardware thread)", most));
    if (threads > cpu::default_thread_count())
        STRATA_LOG_WARN("cpu: -t {} is more threads than this machine's {}: they take turns on its cores, and every "
                        "matmul waits for the last (leave -t out for one per hardware thread)",
                        threads, cpu::default_thread_count());
    e.n_ctx = ctx;
    e.n_prompt = plan_prompt;
    e.decode_rows = spec == "off" ? 1 : checked_spec_depth() + 1;  // a speculative pass's drafts
    e.prefetch_depth = prefetch;
    e.kv_spill_dir = kv_spill;
    if (!prefix_spill.empty()) e.prefix_spill_bytes = prefix_spill == "0" ? 0 : parse_memory_size(prefix_spill);
    e.trace_path = trace;
    e.int8_activations = int8_acts;
    e.bf16_prefill = bf16_prefill;
    e.tile_weights = !no_tile;
    e.graphs = !no_graphs;
    for (const std::string& spec : override_tensor) e.overrides.push_back(runtime::parse_tensor_override(spec));
    e.expert_policy = runtime::parse_expert_policy(expert_policy);
    const auto kv = dtype_from_name(kv_type.empty() ? "f16" : kv_type);
    if (!kv || !cpu::is_kv_type(*kv))
        throw UsageError(fmt::format("--kv-type '{}' is not a KV cache type", kv_type), fmt::format("use one of {}", cpu::kKvTypeList));
    e.kv_type = *kv;
    if (gpu_mem.find('%') != std::string::npos)
        throw UsageError(fmt::format("--gpu-mem '{}' is a share; give the GPU memory as a size", gpu_mem), "e.g. --gpu-mem 20G");
    try {
        if (!gpu_mem.empty()) e.gpu.gpu_mem = gpu_mem == "0" ? 0 : parse_memory_size(gpu_mem);
    } catch (const UsageError& err) {  // its hint would offer a share of RAM, which --gpu-mem is not
        throw UsageError(fmt::format("--gpu-mem: {}", err.what()), "give the GPU memory as a size (e.g. 20G), or 0 for the CPU alone");
    }
    const auto where = runtime::parse_attention(attention);
    if (!where) throw UsageError(fmt::format("--attention '{}' is not a choice", attention), "use auto, cpu or gpu");
    e.gpu.attention = *where;
    const auto device = runtime::parse_device(this->device);
    if (!device) throw UsageError(fmt::format("--device '{}' is not a choice", this->device), "use auto, cpu, sim or cuda");
    e.gpu.device = *device;
    if (!(sim_link > 0))
        throw UsageError(fmt::format("--sim-link {} must be above 0 GB/s", sim_link), "give the simulated link's GB/s each way, e.g. --sim-link 25");
    e.gpu.sim_link_gbps = sim_link;
    e.gpu.sim_threads = sim_threads;
    const auto offload = runtime::parse_op_offload(op_offload);
    if (!offload)
        throw UsageError(fmt::format("--op-offload '{}' is not a choice", op_offload),
                         "use auto, on, off, or the fewest prompt rows a pass needs to compute the CPU layers on the device");
    e.gpu.op_offload = *offload;
    if (!sim_shrink.empty()) {
        const size_t colon = sim_shrink.find(':');
        const std::string passes = sim_shrink.substr(0, colon);
        const bool digits = !passes.empty() && passes.size() < 10 && passes.find_first_not_of("0123456789") == std::string::npos;
        if (colon == std::string::npos || !digits)
            throw UsageError(fmt::format("--sim-shrink-after '{}' is not PASSES:BYTES", sim_shrink),
                             "e.g. --sim-shrink-after 8:64M takes 64 MiB of the simulated device's memory after 8 passes");
        e.gpu.sim_shrink_after = std::stoll(passes);
        e.gpu.sim_shrink_bytes = parse_memory_size(sim_shrink.substr(colon + 1));
    }
    warn_device_flags_unused(*this, e.gpu);
    e.dram_budget = !dram.empty() ? parse_memory_size(dram) : env_dram_budget();
    if (e.dram_budget > system_ram_bytes())
        STRATA_LOG_WARN("--dram {} is more than this machine's {} of memory: the plan may keep more resident than it "
                        "holds, and the system will page it out", format_bytes(e.dram_budget), format_bytes(system_ram_bytes()));
    if (sim_threads > cpu::default_thread_count())
        STRATA_LOG_WARN("--sim-threads {} is more than this machine's {} threads: the simulated device and the CPU take turns "
                        "on its cores", sim_threads, cpu::default_thread_count());
    if (!plan_file.empty()) {
        const std::string text = read_file(plan_file, "the plan", "make one with `strata plan -m MODEL -o FILE`");
        try {
            e.plan = planner::Plan::from_json(text);
        } catch (const UsageError& err) {
            throw UsageError(fmt::format("--plan {}: {}", plan_file, err.what()), err.hint());
        }
        // The KV cache the plan was sized and priced for, unless --kv-type says otherwise.
        const DType planned = e.plan->policy.kv_type;
        if (kv_type.empty() && cpu::is_kv_type(planned)) e.kv_type = planned;
        else if (planned != e.kv_type)
            STRATA_LOG_WARN("--kv-type {} runs in place of the plan's KV type {}; its placement was sized for that",
                            dtype_name(e.kv_type), dtype_name(planned));
    }
    if (show_plan)
        e.on_plan = [depth = spec == "off" ? 0 : spec_depth](const runtime::Placement& p) {
            fmt::print(stderr, "profile   {}\n{}\n", p.hw_source, planner::format_plan(p.plan, p.shape, p.hw, p.search, p.limits));
            if (p.alternative)
                fmt::print(stderr, "weighed   against {}: {:.3g} tokens/s decode, TTFT {} (this plan: {:.3g} tokens/s)\n",
                           p.alternative->what, p.alternative->prediction.decode_tps_per_seq,
                           planner::format_seconds(p.alternative->prediction.ttft_s), p.plan.prediction.decode_tps_per_seq);
            if (p.unbounded)
                fmt::print(stderr, "          made again to decode no slower than it: the workload's best plan decodes at {:.3g} "
                           "tokens/s, TTFT {}\n",
                           p.unbounded->decode_tps_per_seq, planner::format_seconds(p.unbounded->ttft_s));
            if (const std::string offload = runtime::describe_op_offload(p); !offload.empty()) fmt::print(stderr, "{}\n", offload);
            if (depth > 0)
                fmt::print(stderr, "speculation: at acceptance 0.5 {}; at 0.8 {}; at 0.95 {}\n", speculation_forecast(p, 0.5, depth),
                           speculation_forecast(p, 0.8, depth), speculation_forecast(p, 0.95, depth));
        };
    // A drafting engine's share of --dram, held for it while the model is planned.
    e.draft = draft_source();
    if (!draft_model.empty() && !e.draft)
        STRATA_LOG_WARN("--draft-model {} is not loaded: --spec {} drafts without it", draft_model, spec);
    return e;
}

std::optional<runtime::DraftSource> ModelOptions::draft_source() const {
    if (spec == "self") {
        if (!draft_model.empty())
            throw UsageError("--spec self drafts with the model's own first layers, not --draft-model",
                             "leave out --draft-model, or use --spec draft");
        return runtime::DraftSource{};
    }
    if (draft_model.empty() || spec == "off" || spec == "lookup") return std::nullopt;
    return runtime::DraftSource{draft_model};
}


int ModelOptions::checked_spec_depth() const {
    if (spec_depth < 1 || spec_depth > runtime::PassPrices::kMaxRows - 1)
        throw UsageError(fmt::format("--spec-depth {} is out of range", spec_depth),
                         fmt::format("give 1 to {} draft tokens a pass", runtime::PassPrices::kMaxRows - 1));
    return spec_depth;
}

runtime::SpecOptions ModelOptions::spec_options(runtime::Engine* draft) const {
    runtime::SpecOptions o;
    o.mode = runtime::parse_spec_mode(spec);
    o.draft_model = draft;
    o.max_depth = checked_spec_depth();
    if (spec_width < 1 || spec_width > runtime::kMaxDraftWidth)
        throw UsageError(fmt::format("--spec-width {} is out of range", spec_width),
                         fmt::format("give 1 (chains) to {} guesses a draft node", runtime::kMaxDraftWidth));
    o.max_width = spec_width;
    return o;
}

std::unique_ptr<runtime::Engine> ModelOptions::load_draft_model(const runtime::Engine& target) const {
    const auto source = draft_source();
    if (!source) return nullptr;
    // In memory on the CPU, within the share of --dram the target holds for it.
    return naming_draft_model(draft_model, [&] {
        auto engine = std::make_unique<runtime::Engine>(runtime::draft_engine_options(target, *source));
        if (!source->early_layers()) runtime::check_same_vocabulary(target.tokenizer(), engine->tokenizer());
        return engine;
    });
}

std::string speculation_forecast(const runtime::Placement& p, double acceptance, int max_depth) {
    // A verifying pass of r rows as the plan prices one sequence's decoding step of r rows.
    auto pass_seconds = [&](int64_t rows) { return p.predict(256, 256, 1, static_cast<int>(rows)).decode.time_s; };
    const planner::SpecForecast f = planner::forecast_speculation(pass_seconds, acceptance, max_depth);
    return fmt::format("{} drafts a pass, {:.2f} tokens a pass, {:.1f} t/s (plain {:.1f})", f.depth, f.tokens_per_pass,
                       f.tokens_per_s, f.plain_tokens_per_s);
}

std::string read_file(const std::string& path, const std::string& what, const std::string& hint) {
    std::error_code ec;
    // A folder opens, and reads as nothing (or fails deep in the stream with a raw message).
    if (std::filesystem::is_directory(path, ec)) throw UsageError(fmt::format("{} '{}' is a folder, not a file", what, path), hint);
    std::ifstream in(path, std::ios::binary);
    if (!in) throw IoError(fmt::format("cannot read {} '{}': {}", what, path, std::strerror(errno)), hint);
    std::stringstream ss;
    ss << in.rdbuf();
    if (in.bad()) throw IoError(fmt::format("cannot read {} '{}': {}", what, path, std::strerror(errno)), hint);
    return ss.str();
}

std::shared_ptr<const runtime::Grammar> load_grammar(const std::string& gbnf_file, const std::string& schema_file) {
    if (!gbnf_file.empty() && !schema_file.empty())
        throw UsageError("--grammar and --json-schema both constrain the output", "give one of them");
    std::string gbnf;
    const std::string& file = gbnf_file.empty() ? schema_file : gbnf_file;
    try {
        if (!gbnf_file.empty()) {
            gbnf = read_file(gbnf_file, "the grammar", "give a GBNF file, as llama.cpp's --grammar-file reads");
        } else if (!schema_file.empty()) {
            const std::string text = read_file(schema_file, "the JSON schema", "give a file holding one JSON schema");
            openai::Json schema;
            try {
                // Within the server's bounds: deeper schemas would exhaust the stack of the
                // code that walks them.
                schema = openai::parse_json_limited(text, "it", "invalid_json");
            } catch (const openai::ApiError& err) {
                throw UsageError(err.what(), "give a file holding one JSON schema");
            }
            gbnf = runtime::json_schema_to_gbnf(schema);
        } else {
            return nullptr;
        }
        return std::make_shared<const runtime::Grammar>(runtime::parse_gbnf(gbnf));
    } catch (const UsageError& err) {
        throw UsageError(fmt::format("{}: {}", file, err.what()), err.hint());
    }
}

uint64_t env_dram_budget() {
    const char* env = std::getenv("STRATA_DRAM");
    if (!env || !*env) return 0;
    try {
        return parse_memory_size(env);
    } catch (const UsageError& err) {
        throw UsageError(fmt::format("$STRATA_DRAM: {}", err.what()), err.hint());
    }
}

uint64_t fresh_seed() {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

runtime::Pooling pooling_or(const std::string& name, runtime::Pooling model_default) {
    if (name.empty()) return model_default;
    if (name == "mean") return runtime::Pooling::Mean;
    if (name == "last") return runtime::Pooling::Last;
    if (name == "cls" || name == "first") return runtime::Pooling::First;
    throw UsageError(fmt::format("--pooling '{}' is not a pooling", name), "use mean, last or cls");
}

int tokens_to_generate(int n_predict) { return n_predict == -1 ? std::numeric_limits<int32_t>::max() : n_predict; }

std::string read_stdin() {
    std::stringstream ss;
    ss << std::cin.rdbuf();
    std::string s = ss.str();
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
}

}  // namespace strata::cli
