#include "tools/cli_flags.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <system_error>

#include <fmt/format.h>

#include "models/chat_template.h"

namespace strata::cli {

namespace {

// The help of a command lists its own flags first, then these groups.
constexpr const char* kSampling = "Sampling";
constexpr const char* kEngine = "Engine and memory";
constexpr const char* kDevice = "Devices and the simulated device";

// The speculative decoding flags, added after a generating command's engine flags.
void add_spec_options(CLI::App& cmd, ModelOptions& m) {
    cmd.add_option("--spec", m.spec,
                   "speculative decoding: auto (draft tokens copied from the prompt and the text so far where its last words "
                   "appeared before, as many as pay at the measured price of a pass: none on a fast resident model, many "
                   "when weights stream; the target checks them in one pass and keeps exactly the tokens it would have "
                   "drawn), lookup (the same drafts, always verified: for measuring), draft (a --draft-model's guesses, as "
                   "many as pay), self (the model's own first quarter to half of its layers guess, then its head: no "
                   "draft model needed; the depth follows what is kept), off (bench's default: plain decoding, as llama-bench measures)")
        ->capture_default_str();
    cmd.add_option("--spec-depth", m.spec_depth, "draft tokens one pass verifies at most")->capture_default_str();
    cmd.add_option("--spec-width", m.spec_width,
                   "guesses a draft may branch into at one place (a tree: several earlier matches' continuations, a draft "
                   "model's second choice where it is unsure), all verified in one pass; 1: chains. Devices verify trees too")
        ->capture_default_str();
    cmd.add_option("--draft-model", m.draft_model,
                   "a small model of the same vocabulary (e.g. a smaller one of the family) that drafts for --spec draft, and "
                   "for --spec auto where given; held in memory, its greedy tokens verified as lookup's are (serve: beside each "
                   "model it loads, each request drafting in a sequence of its own)");
}

}  // namespace

CLI::Validator at_least(int64_t lo) {
    return CLI::Validator(
        [lo](std::string& text) -> std::string {
            constexpr int64_t hi = std::numeric_limits<int32_t>::max();
            int64_t v = 0;
            if (!CLI::detail::lexical_cast(text, v)) return fmt::format("{} is not a whole number", text);
            if (v > hi) return fmt::format("{} is more than {}", text, hi);
            return v >= lo ? "" : fmt::format("{} is below {}; give {} or more", text, lo, lo);
        },
        lo == 0 ? "NONNEGATIVE" : lo == 1 ? "POSITIVE" : fmt::format("AT LEAST {}", lo));
}

CLI::Validator non_empty_path() {
    return CLI::Validator([](std::string& text) { return text.empty() ? std::string("an empty path names no file") : std::string(); },
                          "");
}

CLI::Validator positive_number() {
    return CLI::Validator(
        [](std::string& text) -> std::string {
            double v = 0;
            if (!CLI::detail::lexical_cast(text, v)) return fmt::format("{} is not a number", text);
            return std::isfinite(v) && v > 0 ? "" : fmt::format("{} is not a number above 0", text);
        },
        "POSITIVE");
}

void add_model_option(CLI::App& cmd, ModelOptions& m) {
    cmd.add_option("-m,--model", m.model, "GGUF model file (default: SmolLM2-135M-Instruct from the model cache)")
        ->check(non_empty_path())
        ->type_name("FILE");
    cmd.add_flag("-v,--verbose", m.verbosity, "log more (-vv for debug)");
}

void add_plan_prompt_option(CLI::App& cmd, ModelOptions& m, const std::string& by_default) {
    cmd.add_option("--plan-prompt", m.plan_prompt,
                   "prompt tokens the placement is weighed for, e.g. 8000 for long documents, up to a prompt that fills the "
                       "context (default: " + by_default +
                       "); the KV cache holds the whole context either way, and each request is priced for its own "
                       "prompt as it runs")
        ->check(at_least(1))
        ->group(kEngine);
}

void add_engine_options(CLI::App& cmd, ModelOptions& m, bool generates) {
    cmd.option_defaults()->group(kEngine);
    cmd.add_option("-t,--threads", m.threads, "CPU threads (default, or 0: every core)")->check(at_least(0));
    cmd.add_option("-c,--ctx", m.ctx, "context size in tokens (default: the model's, at most 4096)")
        ->check(at_least(0));
    cmd.add_option("--dram", m.dram,
                   "DRAM budget for weights, KV cache and buffers, e.g. 512M, 6G, 40% (default: $STRATA_DRAM, "
                   "else no limit); layers that do not fit are streamed from the model file");
    cmd.add_option("--prefetch", m.prefetch, "streamed layers read ahead of compute")->capture_default_str();
    cmd.add_option("--kv-spill", m.kv_spill,
                   "directory for KV cache layers that do not fit --dram (default: the cache folder; "
                   "the file is removed on exit)")
        ->type_name("DIR");
    cmd.add_option("--prefix-spill", m.prefix_spill,
                   "disk in the --kv-spill directory for prefix-cache blocks evicted from DRAM, so a prompt that "
                   "starts like an earlier one gets its KV back instead of computing it again, e.g. 4G; 0: none "
                   "(default: four times the KV cache)");
    cmd.add_option("--trace", m.trace, "write a Chrome/Perfetto trace of layer reads and compute to FILE.json")->type_name("FILE");
    cmd.add_option("--plan", m.plan_file,
                   "place layers by this plan (JSON from `strata plan -m MODEL -o FILE`) instead of planning from --dram")
        ->type_name("FILE");
    cmd.add_option("--kv-type", m.kv_type,
                   "KV cache element type: f16 (default, as llama.cpp; a --plan's own type where it names one) halves "
                   "f32's memory and attention reads for a tiny rounding; bf16 the same with less precision; q8_0 about "
                   "a quarter of f32 (8.5 bits a value), lossy; q4_0 about an eighth (4.5 bits a value), lossier; f32 exact");
    cmd.option_defaults()->group(kDevice);
    cmd.add_option("--gpu-mem", m.gpu_mem,
                   "GPU memory the engine may use, e.g. 20G; 0 runs on the CPU only (default: the GPU's memory less "
                   "room for the CUDA context, when there is a GPU); layers that do not fit are copied in each pass");
    cmd.add_option("--attention", m.attention,
                   "where attention runs with a GPU: gpu (KV cache on the device, or copied in when it does not fit), "
                   "cpu (KV cache in DRAM, attention on the CPU cores), auto (the planner picks the faster)")
        ->capture_default_str();
    cmd.add_option("--device", m.device,
                   "what runs the layers: cuda (a GPU), sim (the simulated device: the same plans as a GPU, its "
                   "memory --gpu-mem of host memory, copies throttled to --sim-link, ops on CPU threads of its own), "
                   "cpu, auto (cuda when a GPU is usable and the plan with it is predicted faster than the CPU alone's, "
                   "else cpu; sim and cuda use the device even where the CPU alone is predicted faster)")
        ->capture_default_str();
    cmd.add_option("--sim-link", m.sim_link, "the simulated device's host <-> device rate in GB/s, each way")
        ->capture_default_str();
    cmd.add_option("--sim-threads", m.sim_threads, "CPU threads the simulated device's ops run on (default: half the cores)")
        ->check(at_least(0));
    cmd.add_option("--op-offload", m.op_offload,
                   "prefill with op offload, where a device plan leaves layers (or a mixture of experts' experts) to "
                   "the CPU: a prompt's pass copies those layers' weights to the device and computes them there (decode "
                   "keeps them on the CPU). auto: from the "
                   "rows the planner predicts the device faster (--show-plan says), on: every prompt pass, off: never, "
                   "N: prompt passes of N rows or more")
        ->capture_default_str();
    cmd.add_option("--sim-shrink-after", m.sim_shrink,
                   "PASSES:BYTES, e.g. 8:64M: after PASSES forward passes (0: at start-up) BYTES of the simulated "
                   "device's memory are taken away, as another program's allocation would take them from a GPU; the "
                   "run moves the layers that no longer fit to the CPU and goes on");
    cmd.add_flag("--int8-acts", m.int8_acts,
                 "quantize activations to one int8 level, as llama.cpp does: faster prefill, slightly less exact");
    cmd.add_flag("--bf16-prefill", m.bf16_prefill,
                 "prompt matmuls of 128+ tokens in bf16 through oneDNN on AMX: up to 2.5x faster prefill, "
                 "weights and activations rounded to bf16 (ignored where the CPU has no AMX)");
    cmd.add_flag("--no-tile", m.no_tile,
                 "keep resident quantized weights as laid out in the file instead of rewriting them at load into "
                 "the order the AVX-512 kernels read them (same results; decode is slower)");
    cmd.add_flag("--no-graphs", m.no_graphs,
                 "launch a device's decode steps op by op instead of as captured graphs: slower, but --trace then "
                 "times each op (a graph is one span)");
    cmd.add_option("--override-tensor,--ot", m.override_tensor,
                   "REGEX=TIER (device, dram, nvme), as llama.cpp: tensors whose GGUF name the pattern matches go to "
                   "that tier, the first matching pattern deciding (repeatable): exps=nvme puts the routed experts on NVMe "
                   "behind the expert cache, exps=dram keeps them in DRAM for the CPU, 'blk\\.[0-3]\\.ffn_.*_exps=device' "
                   "holds those layers' experts on the device; by default the plan decides");
    cmd.add_option("--expert-policy", m.expert_policy,
                   "what the expert cache keeps when experts are offloaded: adaptive (follows whichever of frequency and "
                   "lru this run's routing rewards), frequency (the most chosen) or lru (the most recent)")
        ->capture_default_str();
    if (generates) add_spec_options(cmd, m);
    cmd.add_flag("--show-plan", m.show_plan, "print the placement plan and its predictions to stderr before running")->group(kEngine);
    cmd.option_defaults()->group("Options");
}

void add_sampler_options(CLI::App& cmd, runtime::SamplerParams& s, std::optional<uint64_t>& seed) {
    cmd.option_defaults()->group(kSampling);
    cmd.add_option("--temp", s.temperature, "temperature; 0 = greedy (the server's and the web page's default too)")->capture_default_str();
    cmd.add_option("--top-k", s.top_k, "keep the k most likely tokens; 0 = off")->capture_default_str()->check(at_least(0));
    cmd.add_option("--top-p", s.top_p, "nucleus sampling threshold; 1 = off")->capture_default_str()->check(CLI::Range(0.0, 1.0));
    cmd.add_option("--min-p", s.min_p, "drop tokens below min-p x the top probability; 0 = off")->capture_default_str()->check(
        CLI::Range(0.0, 1.0));
    cmd.add_option("--repeat-penalty", s.repeat_penalty, "penalise recent tokens; 1 = off")->capture_default_str();
    cmd.add_option("--presence-penalty", s.presence_penalty, "subtract from recent tokens' logits")->capture_default_str();
    cmd.add_option("--frequency-penalty", s.frequency_penalty, "subtract per occurrence")->capture_default_str();
    cmd.add_option("--repeat-last-n", s.penalty_last_n, "how many recent tokens the penalties see")->capture_default_str();
    // -1: a new seed each run, as llama.cpp reads it (CLI11 would wrap it to 2^64 - 1).
    cmd.add_option_function<std::string>(
           "-s,--seed",
           [&seed](const std::string& text) {
               if (text == "-1") return seed.reset();
               uint64_t v = 0;
               const auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), v);  // out of range: an error, not 2^64 - 1
               if (text.empty() || err != std::errc() || end != text.data() + text.size())
                   throw CLI::ValidationError("--seed", fmt::format("{} is not a seed: give a whole number from 0 to {}, or -1 for a "
                                                                    "new one each run", text, std::numeric_limits<uint64_t>::max()));
               seed = v;
           },
           "random seed, for the same text again (default, or -1: a new one each run)")
        ->type_name("UINT");
    cmd.option_defaults()->group("Options");
}

void add_chat_template_option(CLI::App& cmd, std::string& family) {
    cmd.add_option("--chat-template", family,
                   fmt::format("template family: {} (default: detected from the model)", models::chat_family_list()));
}

void add_reasoning_budget_options(CLI::App& cmd, runtime::ReasoningBudgetParams& budget) {
    cmd.add_option("--reasoning-budget", budget.tokens,
                   "most tokens a reasoning model may reason before it is made to answer (-1: no cap; 0: none)")
        ->capture_default_str()
        ->check(at_least(-1));
    cmd.add_option("--reasoning-budget-message", budget.message,
                   "text written at the end of reasoning cut short, before the answer (e.g. \"Time to answer.\")");
}

}  // namespace strata::cli
