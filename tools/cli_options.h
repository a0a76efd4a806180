#pragma once
// Plain option structs filled by the CLI11 parser in main.cpp (the one TU that includes
// CLI11) and consumed by the cmd_*.cpp commands.
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/sampler.h"

namespace strata::cli {

struct ModelOptions {
    std::string model;  // empty: the default model
    int threads = 0;
    int ctx = 0;
    int verbosity = 0;
    EngineOptions engine() const { return {model, threads, ctx}; }
};

struct GenerateOptions {
    ModelOptions m;
    std::string prompt;
    std::string prompt_file;
    int n_predict = 128;
    SamplerParams sampler;
    std::vector<std::string> stop;
    bool ignore_eos = false;
    bool json = false;
    bool no_bos = false;
};

struct ChatOptions {
    ModelOptions m;
    std::string system;
    std::string chat_template;  // override of the detected family
    int n_predict = 512;
    SamplerParams sampler;
};

struct PerplexityOptions {
    ModelOptions m;
    std::string file;
    int ctx = 512;
    int max_tokens = 0;  // 0: the whole file
};

struct InspectOptions {
    std::string model;
    bool json = false;
};

int run_generate(const GenerateOptions& o);
int run_chat(const ChatOptions& o);
int run_perplexity(const PerplexityOptions& o);
int run_inspect(const InspectOptions& o);

}  // namespace strata::cli
