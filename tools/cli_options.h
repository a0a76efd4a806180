#pragma once
// Plain option structs filled by the CLI11 parser in main.cpp (the one TU that includes
// CLI11) and consumed by the cmd_*.cpp commands.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/reasoning_budget.h"
#include "runtime/sampler.h"
#include "runtime/spec/draft_source.h"
#include "runtime/spec/speculation.h"

namespace strata::cli {

struct ModelOptions {
    std::string model;  // empty: the default model
    int threads = 0;
    int ctx = 0;
    std::string dram;   // DRAM budget ("6G", "40%"); empty: $STRATA_DRAM, else no limit
    int prefetch = 2;
    // chat's and serve's --plan-prompt: the prompt tokens the placement is weighed for; 0: the
    // command's own choice (a piped chat's message, else kTurnPrompt).
    int plan_prompt = 0;
    // What an interactive chat and a server weigh their placement for unless told: a turn's new
    // tokens, a conversation's earlier turns coming from its KV cache or the prefix cache. Weighed
    // for a prompt filling the context, a device plan trades decode for that prompt's first token
    // (docs/planning.md).
    static constexpr int kTurnPrompt = 512;
    std::string plan_file;  // --plan: a plan JSON from `strata plan -o FILE` instead of planning
    bool show_plan = false; // print the plan table to stderr before running
    std::string kv_spill;   // directory for KV layers that do not fit --dram
    std::string prefix_spill;  // disk for evicted prefix-cache blocks ("4G", "0" = none); empty: 4x the KV cache
    std::string trace;      // Chrome/Perfetto trace file
    bool int8_acts = false; // single-level int8 activations (faster prefill, llama.cpp precision)
    bool bf16_prefill = false;  // prompt matmuls through oneDNN bf16 on AMX
    bool no_tile = false;       // keep resident weights as laid out in the file
    bool no_graphs = false;     // a device's decode steps launched op by op, not as captured graphs
    std::string kv_type;          // KV cache element type: f32, f16, bf16, q8_0, q4_0; empty: --plan's, else f16
    std::string gpu_mem;    // GPU memory budget ("20G", "0" = CPU only); empty: the device's default
    std::string attention = "auto";  // where attention runs with a GPU: auto, cpu, gpu
    std::string device = "auto";     // what runs the layers: auto, cpu, sim, cuda
    double sim_link = 8;             // the simulated device's link, GB/s each way
    int sim_threads = 0;             // the simulated device's CPU threads; 0: half the cores
    std::string op_offload = "auto";  // a prompt's passes computing the CPU layers on the device: auto, on, off, N rows
    std::string sim_shrink;          // PASSES:BYTES of the simulated device's memory taken away mid-run
    std::vector<std::string> override_tensor;  // --override-tensor REGEX=TIER
    std::string expert_policy = "adaptive";    // the expert cache's policy
    int verbosity = 0;
    std::string spec = "auto";  // speculative decoding's drafter: auto, off, lookup, draft, self
    int spec_depth = 16;        // draft tokens one pass verifies at most
    int spec_width = runtime::kMaxDraftWidth;  // children a draft node may have (1: chains)
    std::string draft_model;    // a small model of the same vocabulary that drafts
    runtime::EngineOptions engine() const;  // throws UsageError for a malformed budget or plan file
    int checked_spec_depth() const;          // --spec-depth, or UsageError where out of range
    // With the draft model load_draft_model gave, if any. Throws UsageError for an unknown drafter.
    runtime::SpecOptions spec_options(runtime::Engine* draft = nullptr) const;
    // The --draft-model, resident beside `target` (its vocabulary checked against the target's),
    // or for --spec self the target's first layers (runtime/spec/self_drafter.h); null without either.
    std::unique_ptr<runtime::Engine> load_draft_model(const runtime::Engine& target) const;
    // What drafts in an engine of its own (--draft-model unless --spec is off or lookup, or --spec
    // self's first layers); none otherwise. Throws UsageError for --spec self with a --draft-model.
    std::optional<runtime::DraftSource> draft_source() const;
};

struct GenerateOptions {
    ModelOptions m;
    std::string prompt;
    std::string prompt_file;
    int n_predict = 128;
    runtime::SamplerParams sampler;
    std::vector<std::string> stop;
    bool ignore_eos = false;
    bool json = false;
    bool no_bos = false;
    std::string grammar_file;  // GBNF the output is held to
    std::string schema_file;   // a JSON schema the output is held to
};

struct ChatOptions {
    ModelOptions m;
    std::string system;
    std::string chat_template;  // override of the detected family
    std::string load;           // start from a conversation saved with /save
    bool print_prompt = false;  // print the rendered prompt for stdin's message and exit (tests)
    bool no_think = false;      // the model's reasoning turned off where its template can
    runtime::ReasoningBudgetParams reasoning_budget;  // --reasoning-budget (the style: the template's)
    int n_predict = 512;
    runtime::SamplerParams sampler;
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

// `strata plan`: the hardware is a profile file (--hw), catalog parts (--gpu, --machine, ...),
// or this machine (cached probe); the model a GGUF file or a catalog shape.
struct PlanOptions {
    std::string model;        // GGUF file, or a catalog shape name
    std::string shape;        // catalog shape name
    std::string weight_type;  // catalog shapes only (default: the shape's usual types, else F16)
    std::string kv_type = "F16";  // or "auto": also search Q8_0 and Q4_0 (lossy)
    std::string hw;           // hardware profile JSON
    std::string machine, gpu, pcie, cpu, dram_kind, nvme;  // catalog names (a whole machine, or its parts)
    std::string gpu_mem, dram, nvme_size;                 // capacities ("24G")
    double nvme_bw = 0;                                   // GB/s, overrides the drive's read rate
    std::string gpu_budget, dram_budget, nvme_budget;     // what the plan may use
    std::string workload;     // "prompt=512,gen=128,batch=8,objective=throughput"
    int batch = 0, prompt_len = 0, gen_len = 0;
    std::string objective;
    bool no_cpu_attention = false, no_recompute = false, frontier = false, json = false;
    std::string out;          // write the plan JSON here
    std::string svg;          // write the decode-step timeline here
    // Targets the workload must meet; 0: none. Missed ones are reported (and --export sized for them).
    double target_tps = 0;         // decode tokens/s each sequence sees
    double target_ttft = 0;        // seconds to the first token
    double target_throughput = 0;  // generated tokens/s in all
    std::string export_engine;     // vllm, sglang or llama-rpc: write that engine's launch (tools/plan/launch_export.h)
    std::string cluster_gpu;       // the cluster's catalog GPU; empty: h100-80g
    int gpus_per_node = 8;
    bool ui = false;          // serve the planner page instead (tools/server/plan_ui)
    std::string ui_host = "127.0.0.1";
    int ui_port = 8090;
    int verbosity = 0;
};

struct ProbeOptions {
    bool json = false;
    std::string out;        // also write the profile JSON here
    std::string disk_dir;   // default: the model directory
    std::string disk_size;  // test file size, default 512M
    bool quick = false;
    bool no_cache = false;  // do not update the cached profile
    int threads = 0;
    int verbosity = 0;
};

// `strata bench`: llama-bench's pp/tg tests (tools/cmd_bench.cpp).
struct BenchOptions {
    ModelOptions m;
    int n_prompt = 512;  // pp<n_prompt>; 0 skips it
    int n_gen = 128;     // tg<n_gen>; 0 skips it
    int reps = 5;
    int batch = 1;   // sequences evaluated together (aggregate tokens/s)
    int depth = 0;   // positions each sequence holds before a test (llama-bench's -d)
    bool json = false;
};

// `strata serve`: the OpenAI-compatible HTTP server (tools/cmd_serve.cpp).
struct ServeOptions {
    ModelOptions m;
    std::string host = "127.0.0.1";
    int port = 8080;
    std::string api_key;        // empty: $STRATA_API_KEY, else no authentication
    std::string alias;          // the model id in /v1/models and answers; default: the file name's stem
    std::string chat_template;  // override of the detected family
    runtime::ReasoningBudgetParams reasoning_budget;  // a request's, unless it names its own
    int max_batch = 8;          // sequences generating at once
    int max_queue = 64;         // requests waiting beyond those; more get 503
    // While other addresses have work: sequences one address runs (0: an equal share of
    // max_batch) and requests it has waiting (0: a quarter of max_queue; more get 429).
    int max_batch_per_client = 1;
    int max_queue_per_client = 0;
    std::string max_body = "1M";
    int http_threads = 0;       // 0: max_batch + max_queue + 4, so that every admitted client has one
    int timeout_s = 30;         // reading a whole request, writing to a slow client
    int header_timeout_s = 10;  // reading a request's line and headers
    int max_connections = 1024;
    int max_connections_per_client = 128;
    int max_requests_per_client = 0;  // 0: no limit per address (the queue's bounds all)
    int shutdown_timeout_s = 30;  // how long SIGTERM waits for requests in flight before cancelling them
    std::string pooling;        // of /v1/embeddings: mean, last or cls; empty: the model's
    std::string models_dir;     // every GGUF here, by name; empty: the model cache (unless -m names one file)
    int max_models = 0;         // loaded at once; 0: as many as the memory budget holds
    std::string keep_alive;     // how long a model stays loaded after its last request; empty: until memory is needed
    std::vector<std::string> cors_origins;  // pages elsewhere that may call the API from a browser
    std::vector<std::string> allowed_hosts;  // Host names a loopback-bound server answers besides loopback ones
};

// `strata list`: the models `strata serve` would serve (tools/cmd_list.cpp).
struct ListOptions {
    std::string models_dir;  // empty: the model cache
    bool json = false;       // as GET /v1/models answers
};

// `strata embed`: texts to embedding vectors, printed as /v1/embeddings answers (tools/cmd_embed.cpp).
struct EmbedOptions {
    ModelOptions m;
    std::vector<std::string> texts;  // -p, repeatable
    std::string file;                // one text a line (also standard input)
    std::string pooling;             // mean, last or cls; empty: the model's
    bool base64 = false;
};

// `strata batch`: OpenAI batch files through the scheduler (tools/cmd_batch.cpp).
struct BatchOptions {
    ModelOptions m;
    std::string input, output;
    std::string chat_template;
    runtime::ReasoningBudgetParams reasoning_budget;  // a request's, unless it names its own
    int max_batch = 8;
};

// The tokens a reply may take from -n: -1 (llama.cpp's "infinite") is until the end of text or
// a full context, which the scheduler's own bound then ends.
int tokens_to_generate(int n_predict);
// All of standard input, without trailing newlines.
std::string read_stdin();
// A file's bytes; IoError naming `what` and the path, with `hint`, when it cannot be read.
std::string read_file(const std::string& path, const std::string& what, const std::string& hint);
// The plan's forecast for speculative decoding of one sequence at this acceptance rate: the
// drafts a pass verifies, tokens a pass, and tokens/s against plain decoding, as one phrase.
std::string speculation_forecast(const runtime::Placement& p, double acceptance, int max_depth);
// The grammar of --grammar FILE (GBNF) or --json-schema FILE; nullptr for neither. Errors name the file.
std::shared_ptr<const runtime::Grammar> load_grammar(const std::string& gbnf_file, const std::string& schema_file);

int run_generate(const GenerateOptions& o);
int run_chat(const ChatOptions& o);
int run_perplexity(const PerplexityOptions& o);
int run_inspect(const InspectOptions& o);
int run_plan(const PlanOptions& o);
int run_probe(const ProbeOptions& o);
int run_bench(const BenchOptions& o);
int run_serve(const ServeOptions& o);
int run_batch(const BatchOptions& o);
int run_embed(const EmbedOptions& o);
int run_list(const ListOptions& o);
// A seed for a run that names none: each run samples differently.
// $STRATA_DRAM in bytes, the DRAM budget of a command given no --dram; 0 when unset.
uint64_t env_dram_budget();
uint64_t fresh_seed();
// The pooling named by --pooling, or the model's own when `name` is empty.
runtime::Pooling pooling_or(const std::string& name, runtime::Pooling model_default);

}  // namespace strata::cli
