// `strata <command>`: parses the command line and hands a plain options struct to the
// command. Errors stop here: one line saying what went wrong, one saying how to fix it.
#include <unistd.h>

#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>

#include "runtime/core/error.h"
#include "runtime/core/log.h"
#include "tools/cli_options.h"

using namespace strata;

namespace {

void add_model_options(CLI::App& cmd, cli::ModelOptions& m) {
    cmd.add_option("-m,--model", m.model, "GGUF model file (default: SmolLM2-135M-Instruct from the model cache)");
    cmd.add_option("-t,--threads", m.threads, "CPU threads (default: every core)")->check(CLI::NonNegativeNumber);
    cmd.add_option("-c,--ctx", m.ctx, "context size in tokens (default: the model's, at most 4096)")
        ->check(CLI::NonNegativeNumber);
    cmd.add_flag("-v,--verbose", m.verbosity, "log more (-vv for debug)");
}

void add_sampler_options(CLI::App& cmd, SamplerParams& s) {
    cmd.add_option("--temp", s.temperature, "temperature; 0 = greedy")->capture_default_str();
    cmd.add_option("--top-k", s.top_k, "keep the k most likely tokens; 0 = off")->capture_default_str();
    cmd.add_option("--top-p", s.top_p, "nucleus sampling threshold; 1 = off")->capture_default_str();
    cmd.add_option("--min-p", s.min_p, "drop tokens below min-p x the top probability; 0 = off")->capture_default_str();
    cmd.add_option("--repeat-penalty", s.repeat_penalty, "penalise recent tokens; 1 = off")->capture_default_str();
    cmd.add_option("--presence-penalty", s.presence_penalty, "subtract from recent tokens' logits")->capture_default_str();
    cmd.add_option("--frequency-penalty", s.frequency_penalty, "subtract per occurrence")->capture_default_str();
    cmd.add_option("--repeat-last-n", s.penalty_last_n, "how many recent tokens the penalties see")->capture_default_str();
    cmd.add_option("-s,--seed", s.seed, "random seed")->capture_default_str();
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"Strata: run large language models on one workstation, across GPU, DRAM and NVMe"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "strata 0.1.0");

    cli::GenerateOptions gen;
    auto* g = app.add_subcommand("generate", "complete a prompt and stream the text");
    add_model_options(*g, gen.m);
    g->add_option("-p,--prompt", gen.prompt, "prompt text (default: read standard input)");
    g->add_option("-f,--file", gen.prompt_file, "read the prompt from a file");
    g->add_option("-n,--n-predict", gen.n_predict, "tokens to generate")->capture_default_str();
    add_sampler_options(*g, gen.sampler);
    g->add_option("--stop", gen.stop, "stop when this text is generated (repeatable)");
    g->add_flag("--ignore-eos", gen.ignore_eos, "keep generating past end-of-sequence tokens");
    g->add_flag("--no-bos", gen.no_bos, "do not add the beginning-of-sequence token");
    g->add_flag("--json", gen.json, "print one JSON object: prompt_tokens, tokens, text, timings");

    cli::ChatOptions chat;
    auto* c = app.add_subcommand("chat", "talk with the model (plain generation when stdin is not a terminal)");
    add_model_options(*c, chat.m);
    c->add_option("--system", chat.system, "system prompt");
    c->add_option("--chat-template", chat.chat_template, "template family: chatml, llama3, llama2, zephyr, gemma");
    c->add_option("-n,--n-predict", chat.n_predict, "most tokens per reply")->capture_default_str();
    add_sampler_options(*c, chat.sampler);

    cli::PerplexityOptions ppl;
    auto* p = app.add_subcommand("perplexity", "measure perplexity on a text file (llama.cpp's method)");
    add_model_options(*p, ppl.m);
    p->add_option("-f,--file", ppl.file, "text file")->required();
    p->add_option("--chunk", ppl.ctx, "tokens per chunk; the second half of each is scored")->capture_default_str();
    p->add_option("--max-tokens", ppl.max_tokens, "use only the first N tokens of the file (0 = all)");

    cli::InspectOptions insp;
    auto* i = app.add_subcommand("inspect", "print a GGUF file's metadata and tensor table");
    i->add_option("model", insp.model, "GGUF model file (default: the default model)");
    i->add_flag("--json", insp.json, "print JSON");

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }

    try {
        if (*g) return init_logging(gen.m.verbosity), cli::run_generate(gen);
        if (*c) return init_logging(chat.m.verbosity), cli::run_chat(chat);
        if (*p) return init_logging(ppl.m.verbosity), cli::run_perplexity(ppl);
        if (*i) return init_logging(0), cli::run_inspect(insp);
    } catch (const Error& e) {
        std::fprintf(stderr, "strata: error: %s\n", e.what());
        if (!e.hint().empty()) std::fprintf(stderr, "  hint: %s\n", e.hint().c_str());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "strata: error: %s\n", e.what());
        return 1;
    }
    return 0;
}
