// `strata <command>`: parses the command line and hands a plain options struct to the
// command. Errors stop here: one line saying what went wrong, one saying how to fix it.
#include <malloc.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <optional>

#include <CLI/CLI.hpp>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "tools/cli_flags.h"
#include "tools/cli_options.h"
#include "tools/flag_suggestion.h"
#include "tools/version.h"

using namespace strata;
using namespace strata::cli;

namespace {
// A command's results that standard output could not take (a full disk, a closed pipe) fail the
// run instead of vanishing with exit status 0.
int output_written(int rc) {
    std::cout.flush();
    if (std::fflush(stdout) == 0 && !std::ferror(stdout) && std::cout) return rc;
    std::fprintf(stderr, "strata: error: writing the results to standard output failed: %s\n  hint: is the disk full, or "
                         "did the program reading them exit?\n", std::strerror(errno));
    return rc != 0 ? rc : 1;
}
}  // namespace

int main(int argc, char** argv) {
    // The C library's allocator keeps a pool per thread that allocates (the server's workers, the
    // CPU's threads): freed answers stayed in them, a server under --dram 300M held 1.2 GB after
    // large embedding answers. Two pools keep what is freed for reuse.
    ::mallopt(M_ARENA_MAX, 2);
    CLI::App app{"Strata: run large language models on one workstation, across GPU, DRAM and NVMe"};
    app.require_subcommand(1);
    // A flag given twice takes the last, as a command line edited by appending expects
    // (repeatable flags keep every value).
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    app.set_version_flag("--version", fmt::format("strata {}", kVersion));

    cli::GenerateOptions gen;
    std::optional<uint64_t> gen_seed, chat_seed;
    auto* g = app.add_subcommand("generate", "complete a prompt and stream the text");
    add_model_option(*g, gen.m);
    auto* gen_prompt = g->add_option("-p,--prompt", gen.prompt, "prompt text (default: read standard input)");
    g->add_option("-f,--file", gen.prompt_file, "read the prompt from a file")->excludes(gen_prompt);
    g->add_option("-n,--n-predict", gen.n_predict, "tokens to generate (-1: until the end of text or a full context)")
        ->capture_default_str()
        ->check(at_least(-1));
    g->add_option("--stop", gen.stop, "stop when this text is generated (repeatable)");
    g->add_flag("--ignore-eos", gen.ignore_eos, "keep generating past end-of-sequence tokens");
    g->add_flag("--no-bos", gen.no_bos, "do not add the beginning-of-sequence token");
    g->add_flag("--json", gen.json, "print one JSON object: prompt_tokens, tokens, text, stop_reason, timings, memory, plan");
    g->add_option("--grammar", gen.grammar_file, "hold the output to the GBNF grammar in FILE (llama.cpp's notation)")->type_name("FILE");
    g->add_option("--json-schema", gen.schema_file, "hold the output to JSON that validates against the schema in FILE")->type_name("FILE");
    add_sampler_options(*g, gen.sampler, gen_seed);
    add_engine_options(*g, gen.m);

    cli::ChatOptions chat;
    auto* c = app.add_subcommand("chat", "talk with the model (when stdin is not a terminal, what arrives there is one chat turn)");
    add_model_option(*c, chat.m);
    c->add_option("--system", chat.system, "system prompt");
    add_chat_template_option(*c, chat.chat_template);
    c->add_option("--load", chat.load, "start from a conversation saved with /save FILE");
    c->add_flag("--no-think", chat.no_think, "answer without reasoning first, where the model's template can (Qwen3)");
    add_reasoning_budget_options(*c, chat.reasoning_budget);
    c->add_flag("--print-prompt", chat.print_prompt, "print the prompt rendered for stdin's message and exit")->group("");
    c->add_option("-n,--n-predict", chat.n_predict, "most tokens per reply (-1: until the end of text or a full context)")
        ->capture_default_str()
        ->check(at_least(-1));
    add_sampler_options(*c, chat.sampler, chat_seed);
    add_engine_options(*c, chat.m);
    add_plan_prompt_option(*c, chat.m, fmt::format("the message piped in, else {}: a turn, the earlier ones in the KV cache",
                                                  cli::ModelOptions::kTurnPrompt));

    cli::PerplexityOptions ppl;
    auto* p = app.add_subcommand("perplexity", "measure perplexity on a text file (llama.cpp's method)");
    add_model_option(*p, ppl.m);
    p->add_option("-f,--file", ppl.file, "text file")->required()->type_name("FILE");
    p->add_option("--chunk", ppl.ctx, "tokens per chunk; the second half of each is scored")->capture_default_str();
    p->add_option("--max-tokens", ppl.max_tokens, "use only the first N tokens of the file (0 = all)");
    add_engine_options(*p, ppl.m, /*generates=*/false);

    cli::InspectOptions insp;
    auto* i = app.add_subcommand("inspect", "print a GGUF file's metadata and tensor table");
    auto* insp_file = i->add_option("model", insp.model, "GGUF model file (default: the default model)");
    i->add_option("-m,--model", insp.model, "the same, as the other commands take it")->excludes(insp_file)->check(non_empty_path());
    i->add_flag("--json", insp.json,
                "print JSON: metadata values as data (numbers, booleans, whole strings; an array as {type, count, items} "
                "with its first 16 items), the tensor table, the size and the parameter count");

    cli::PlanOptions plan;
    auto* pl = app.add_subcommand("plan", "plan where weights and KV live and predict speed (a dry run: nothing is loaded)");
    pl->add_option("-m,--model", plan.model, "GGUF file (header only is read) or a catalog shape name (default: the default model)")
        ->check(non_empty_path());
    pl->add_option("--shape", plan.shape, "catalog model shape: llama3-8b, llama3-70b, llama3-405b, qwen2.5-7b, opt-175b, ...");
    pl->add_option("--weight-type", plan.weight_type, "weight type of a catalog shape: F16, Q8_0, Q4_K, Q4_K_M, Q4_0, ... (default: the shape's usual types, else F16)");
    pl->add_option("--kv-type", plan.kv_type, "KV cache type: F16, BF16, F32, Q8_0, Q4_0, or auto to search F16, Q8_0 and Q4_0 (lossy)")
        ->capture_default_str();
    pl->add_option("--hw", plan.hw, "hardware profile JSON from `strata probe -o FILE` (default: probe this machine, cached)")->type_name("FILE");
    pl->add_option("--machine", plan.machine,
                   "catalog machine, e.g. flexgen-t4 (FlexGen's T4 box); `this`: this machine (or --hw's), the parts named "
                   "beside it in place of its own (parts named without --machine make the catalog's 16-core desktop around them)");
    std::string old_system;  // the flag's old name, which chat uses for the system prompt
    pl->add_option("--system", old_system, "the old name of --machine")->group("");
    pl->add_option("--gpu", plan.gpu, "catalog GPU (rtx3090, rtx4090, rtx5090, l40s, a100-40g, a100-80g, h100-80g, h200, t4) or none");
    pl->add_option("--gpu-mem", plan.gpu_mem, "GPU memory, e.g. 24G (default: the GPU's)");
    pl->add_option("--pcie", plan.pcie, "PCIe generation of the GPU link: gen3, gen4, gen5 (default: the GPU's)");
    pl->add_option("--cpu", plan.cpu, "catalog CPU: ryzen9-7950x, core-i9-14900k, epyc-9654, xeon-gcp-n1");
    pl->add_option("--dram", plan.dram,
                   "DRAM the run may use, e.g. 64G, all of it the plan's budget as generate's --dram is, counted as the "
                   "runtime counts it for a model file (default: $STRATA_DRAM, else this machine's, 90% of it "
                   "the budget; 0: this machine's; a catalog machine's own, 64G where parts make one)");
    pl->add_option("--dram-kind", plan.dram_kind, "DRAM kind: ddr4-3200, ddr5-4800, ddr5-5600, ddr5-6400 (default: the CPU's)");
    pl->add_option("--nvme", plan.nvme, "NVMe generation: gen3, gen4, gen5 (default: this machine's disk; gen4 in a catalog machine)");
    pl->add_option("--nvme-bw", plan.nvme_bw, "NVMe sequential read in GB/s (overrides the drive's)")->check(positive_number());
    pl->add_option("--nvme-size", plan.nvme_size, "NVMe space, e.g. 2T");
    pl->add_option("--gpu-budget", plan.gpu_budget, "GPU memory the plan may use (default: the GPU's less 4%, at least 512 MiB; 0: the CPU alone)");
    pl->add_option("--dram-budget", plan.dram_budget, "DRAM the plan may use (default 90%)");
    pl->add_option("--nvme-budget", plan.nvme_budget, "NVMe space the plan may use (default 95%)");
    pl->add_option("--workload", plan.workload, "prompt=512,gen=128,batch=8,objective=throughput (any subset)");
    pl->add_option("-b,--batch", plan.batch, "sequences (latency: decoded together; throughput: to process)")->check(at_least(1));
    pl->add_option("--prompt-len", plan.prompt_len, "prompt tokens (default 512)")->check(at_least(1));
    pl->add_option("--gen-len", plan.gen_len, "tokens generated per sequence (default 128)")->check(at_least(1));
    pl->add_option("--objective", plan.objective, "latency (default) or throughput");
    pl->add_flag("--no-cpu-attention", plan.no_cpu_attention, "never run attention on the CPU");
    pl->add_flag("--no-recompute", plan.no_recompute, "never recompute KV from saved hidden states");
    pl->add_flag("--frontier", plan.frontier, "also list the latency/throughput trade-off of the best policies");
    pl->add_flag("--json", plan.json, "print the plan as JSON (the form `--plan FILE` loads)");
    pl->add_option("-o,--output", plan.out, "also write the plan JSON to FILE")->type_name("FILE");
    pl->add_option("--svg", plan.svg, "draw one pipelined decode step to FILE")->type_name("FILE");
    pl->add_option("--target-tps", plan.target_tps, "decode tokens/s each sequence must see; the plan says when this machine misses it")
        ->check(positive_number());
    pl->add_option("--target-ttft", plan.target_ttft, "seconds to the first token the workload must meet")->check(positive_number());
    pl->add_option("--target-throughput", plan.target_throughput, "generated tokens/s in all the workload must meet")
        ->check(positive_number());
    pl->add_option("--export", plan.export_engine,
                   "write the launch of a distributed engine for this model and workload to stdout instead: vllm, sglang or "
                   "llama-rpc (tensor/pipeline parallel sizes, nodes, context, KV budget, sized from the catalog)");
    pl->add_option("--cluster-gpu", plan.cluster_gpu, "the cluster's catalog GPU for --export (default: h100-80g)");
    pl->add_option("--gpus-per-node", plan.gpus_per_node, "GPUs in each node of the cluster for --export")->capture_default_str();
    pl->add_flag("--ui", plan.ui, "serve the planner page (every flag of this command, experts per tier, compare) on --host:--port, "
                                  "starting from the other flags given; no model needed");
    pl->add_option("--host", plan.ui_host, "address the planner page listens on (with --ui)")->capture_default_str();
    pl->add_option("--port", plan.ui_port, "port of the planner page (with --ui; 0: any free port)")->capture_default_str()->check(CLI::Range(0, 65535));
    pl->add_flag("-v,--verbose", plan.verbosity, "log more (-vv for debug)");

    cli::ProbeOptions probe;
    auto* pr = app.add_subcommand("probe", "measure this machine (cores, caches, DRAM, disk, CPU matmul rates, GPUs) for the planner");
    pr->add_flag("--json", probe.json, "print the profile as JSON");
    pr->add_option("-o,--output", probe.out, "also write the profile JSON to FILE (for `strata plan --hw FILE`)");
    pr->add_option("--disk-dir", probe.disk_dir, "directory on the drive to measure (default: the model directory)");
    pr->add_option("--disk-size", probe.disk_size, "size of the disk test file (default 512M)");
    pr->add_option("-t,--threads", probe.threads, "CPU threads (default: every core)")->check(at_least(0));
    pr->add_flag("--quick", probe.quick, "smaller measurements (less accurate, a few seconds)");
    pr->add_flag("--no-cache", probe.no_cache, "do not update the cached profile that `strata plan` uses");
    pr->add_flag("-v,--verbose", probe.verbosity, "log more (-vv for debug)");

    cli::BenchOptions bench;
    auto* be = app.add_subcommand("bench", "measure prompt processing (pp) and generation (tg) speed, as llama-bench does");
    add_model_option(*be, bench.m);
    be->add_option("-p,--n-prompt", bench.n_prompt, "prompt tokens evaluated in one batch (pp test; 0 = skip)")->capture_default_str();
    be->add_option("-n,--n-gen", bench.n_gen, "tokens generated one at a time (tg test; 0 = skip)")->capture_default_str();
    be->add_option("-r,--repetitions", bench.reps, "repetitions of each test")->capture_default_str();
    be->add_option("-b,--batch", bench.batch,
                   "sequences evaluated together: pp runs each one's prompt, tg one token of each per step; "
                   "t/s is the aggregate; the plan is made for them")->capture_default_str()->check(at_least(1));
    be->add_option("-d,--n-depth", bench.depth, "positions each sequence already holds when a test starts (untimed)")
        ->capture_default_str()->check(at_least(0));
    be->add_flag("--json", bench.json, "print one JSON object per test");
    bench.m.spec = "off";  // plain decoding, as llama-bench measures it; --spec measures speculation
    add_engine_options(*be, bench.m);

    cli::ServeOptions serve;
    auto* sv = app.add_subcommand("serve", "serve models by name over OpenAI's and Ollama's HTTP APIs");
    add_model_option(*sv, serve.m);
    sv->add_option("--models-dir", serve.models_dir,
                   "serve every GGUF file in DIR by name, each loaded when first asked for (default: the model cache, "
                   "unless -m names one file)");
    sv->add_option("--max-models", serve.max_models, "models loaded at once; the least recently used idle one makes room (0: as "
                                                     "many as the memory budget holds)")->check(at_least(0));
    sv->add_option("--keep-alive", serve.keep_alive, "how long a model stays loaded after its last request: 5m, 1h, 0 (unload "
                                                     "once answered), -1 (default: until memory is needed); Ollama requests may set their own");
    sv->add_option("--cors-origin", serve.cors_origins,
                   "let web pages from ORIGIN (scheme://host:port) call the API from a browser (repeatable); '*' for any page, "
                   "only with --api-key");
    sv->add_option("--allow-host", serve.allowed_hosts,
                   "a host name requests to a loopback-bound server may be sent to, besides localhost and loopback addresses "
                   "(repeatable): a proxy's public name when it passes the request's Host on (Caddy does by default)");
    sv->add_option("--host", serve.host, "address to listen on (loopback unless told)")->capture_default_str();
    sv->add_option("--port", serve.port, "port to listen on (0: any free port)")->capture_default_str()->check(CLI::Range(0, 65535));
    sv->add_option("--api-key", serve.api_key, "require 'Authorization: Bearer KEY' (default: $STRATA_API_KEY, else none)");
    sv->add_option("--alias", serve.alias, "model id in /v1/models and answers (default: the file name)");
    add_chat_template_option(*sv, serve.chat_template);
    add_reasoning_budget_options(*sv, serve.reasoning_budget);
    sv->add_option("--max-batch", serve.max_batch, "sequences generating at once")->capture_default_str()->check(at_least(1));
    sv->add_option("--max-queue", serve.max_queue, "requests waiting beyond those; more get 503")->capture_default_str()
        ->check(at_least(0));
    sv->add_option("--max-batch-per-client", serve.max_batch_per_client,
                   "sequences one address runs at once while other addresses have work (0: max-batch / addresses, at least 1)")
        ->capture_default_str()->check(at_least(0));
    sv->add_option("--max-queue-per-client", serve.max_queue_per_client,
                   "requests one address has waiting while other addresses have work; more get 429 (default 0: max-queue / 4, at least 1)")
        ->check(at_least(0));
    sv->add_option("--max-body", serve.max_body, "largest request body; larger ones get 413")->capture_default_str();
    sv->add_option("--http-threads", serve.http_threads, "worker threads answering requests (default: max-batch + max-queue + 4)")
        ->check(at_least(0));
    sv->add_option("--timeout", serve.timeout_s, "seconds to read a whole request, or to write to a client")->capture_default_str()
        ->check(at_least(1));
    sv->add_option("--header-timeout", serve.header_timeout_s, "seconds to read a request's line and headers")->capture_default_str()
        ->check(at_least(1));
    sv->add_option("--max-connections", serve.max_connections, "connections open at once; more get 503")->capture_default_str()
        ->check(at_least(1));
    sv->add_option("--max-connections-per-client", serve.max_connections_per_client,
                   "connections open at once from one address; more get 429")->capture_default_str()->check(at_least(1));
    sv->add_option("--max-requests-per-client", serve.max_requests_per_client,
                   "requests answered at once for one address; more get 429 (default 0: no limit)")->check(at_least(0));
    sv->add_option("--shutdown-timeout", serve.shutdown_timeout_s, "seconds SIGTERM waits for requests in flight")
        ->capture_default_str()->check(at_least(0));
    sv->add_option("--pooling", serve.pooling, "how /v1/embeddings pools a text's hidden states: mean, last or cls (first is another name for cls; default: the model's)");
    add_engine_options(*sv, serve.m);
    add_plan_prompt_option(*sv, serve.m, fmt::format("{}: a turn, a conversation's earlier ones in the prefix cache",
                                                   cli::ModelOptions::kTurnPrompt));

    cli::ListOptions list;
    auto* ls = app.add_subcommand("list", "list the models `strata serve` would serve: name, alias, size, architecture, quantization, context");
    ls->add_option("--models-dir", list.models_dir, "the folder to list (default: the model cache)");
    ls->add_flag("--json", list.json, "print the list as GET /v1/models answers it");

    cli::EmbedOptions embed;
    auto* em = app.add_subcommand("embed", "embedding vectors of texts, printed as JSON (the /v1/embeddings answer)");
    add_model_option(*em, embed.m);
    auto* embed_texts = em->add_option("-p,--prompt", embed.texts, "a text to embed (repeatable)");
    em->add_option("-f,--file", embed.file, "embed each line of FILE (default: each line of standard input)")->excludes(embed_texts);
    em->add_option("--pooling", embed.pooling, "mean, last or cls (first is another name for cls; default: the model's, last for a decoder)");
    em->add_flag("--base64", embed.base64, "vectors as base64 of little-endian float32, as encoding_format base64");
    add_engine_options(*em, embed.m, /*generates=*/false);

    cli::BatchOptions batch;
    auto* ba = app.add_subcommand("batch", "run an OpenAI batch file (JSONL) through the scheduler; resumable");
    add_model_option(*ba, batch.m);
    ba->add_option("-i,--input", batch.input, "requests, one JSON object a line")->required();
    ba->add_option("-o,--output", batch.output, "answers, one a line; a rerun skips those it holds")->required();
    add_chat_template_option(*ba, batch.chat_template);
    add_reasoning_budget_options(*ba, batch.reasoning_budget);
    ba->add_option("--max-batch", batch.max_batch, "sequences generating at once; the plan is made for them")->capture_default_str()->check(at_least(1));
    add_engine_options(*ba, batch.m);

    // A flag the command does not take, or a value it cannot use: Strata's two lines, as every
    // other error (--help and --version are CLI11's successes, printed by it).
    auto refuse = [&](const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) return app.exit(e);
        const auto used = app.get_subcommands();
        const std::string help = used.empty() ? "`strata --help` lists the commands"
                                              : fmt::format("`strata {} --help` lists its flags", used.front()->get_name());
        // A flag the command does not take: named, with the nearest one it does.
        if (!used.empty() && dynamic_cast<const CLI::ExtrasError*>(&e))
            for (const std::string& arg : used.front()->remaining())
                if (arg.size() > 1 && arg[0] == '-' && !std::isdigit(static_cast<unsigned char>(arg[1]))) {
                    const std::string near = cli::nearest_flag(*used.front(), arg);
                    std::fprintf(stderr, "strata: error: `strata %s` has no flag %s\n  hint: %s%s\n", used.front()->get_name().c_str(),
                                 arg.substr(0, arg.find('=')).c_str(), near.empty() ? "" : fmt::format("did you mean {}? ", near).c_str(),
                                 help.c_str());
                    return e.get_exit_code();
                }
        std::fprintf(stderr, "strata: error: %s\n  hint: %s\n", e.what(), help.c_str());
        return e.get_exit_code();
    };
    try {
        app.parse(argc, argv);
    } catch (const CLI::RequiredError& e) {
        if (!app.get_subcommands().empty()) return refuse(e);
        if (argc > 1 && argv[1][0] != '-') {
            std::fprintf(stderr, "strata: error: '%s' is not a command\n  hint: `strata --help` lists the commands\n", argv[1]);
            return 2;
        }
        // No command: what there is to run, and a non-zero exit for scripts.
        std::fprintf(stderr, "%s\nstrata: error: name a command, e.g. `strata chat`; `strata COMMAND --help` lists its flags\n",
                     app.help().c_str());
        return 2;
    } catch (const CLI::ParseError& e) {
        return refuse(e);
    }
    if (!old_system.empty()) {
        std::fprintf(stderr, "strata: warning: `plan --system` is now `plan --machine` (chat's --system is the system prompt)\n");
        if (plan.machine.empty()) plan.machine = old_system;
    }
    gen.sampler.seed = gen_seed.value_or(cli::fresh_seed());
    chat.sampler.seed = chat_seed.value_or(cli::fresh_seed());

    auto run = [&] {
        if (*g) return init_logging(gen.m.verbosity), cli::run_generate(gen);
        if (*c) return init_logging(chat.m.verbosity), cli::run_chat(chat);
        if (*p) return init_logging(ppl.m.verbosity), cli::run_perplexity(ppl);
        if (*i) return init_logging(0), cli::run_inspect(insp);
        if (*pl) return init_logging(plan.verbosity), cli::run_plan(plan);
        if (*pr) return init_logging(probe.verbosity), cli::run_probe(probe);
        if (*be) return init_logging(bench.m.verbosity), cli::run_bench(bench);
        if (*sv) return init_logging(serve.m.verbosity), cli::run_serve(serve);
        if (*ba) return init_logging(batch.m.verbosity), cli::run_batch(batch);
        if (*em) return init_logging(embed.m.verbosity), cli::run_embed(embed);
        if (*ls) return init_logging(0), cli::run_list(list);
        return 0;
    };
    try {
        return output_written(run());
    } catch (const Error& e) {
        std::fprintf(stderr, "strata: error: %s\n", e.what());
        if (!e.hint().empty()) std::fprintf(stderr, "  hint: %s\n", e.hint().c_str());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "strata: error: %s\n", e.what());
        return 1;
    }
}
