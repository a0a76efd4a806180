// `strata serve`: the HTTP server (OpenAI's and Ollama's APIs). The models of a folder (or one
// file, -m), each by name, loaded on demand within the memory budget, each with one Scheduler
// shared by every connection; SIGTERM or Ctrl-C stops accepting, lets requests in flight
// finish (a second signal or --shutdown-timeout cancels them) and exits 0.
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "core/bytes.h"
#include "core/error.h"
#include "core/log.h"
#include "core/model_paths.h"
#include "models/model_dir.h"
#include "tools/cli_options.h"
#include "tools/progress.h"
#include "tools/ollama/duration.h"
#include "tools/server/api_server.h"

namespace strata::cli {

namespace {

bool is_loopback(const std::string& host) {
    return host == "127.0.0.1" || host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// Waits for SIGINT/SIGTERM (blocked in every thread, so they queue here); false on timeout.
bool wait_signal(const sigset_t& set, std::chrono::milliseconds timeout) {
    timespec ts{static_cast<time_t>(timeout.count() / 1000), static_cast<long>(timeout.count() % 1000) * 1000000};
    return sigtimedwait(&set, nullptr, &ts) > 0;
}

// Each connection is a descriptor: lift the soft limit toward the hard one so that
// --max-connections, not EMFILE, is what refuses clients.
void raise_descriptor_limit(size_t connections) {
    rlimit r{};
    if (getrlimit(RLIMIT_NOFILE, &r) != 0) return;
    const rlim_t want = std::min<rlim_t>(r.rlim_max, static_cast<rlim_t>(connections) + 1024);
    if (r.rlim_cur < want) {
        r.rlim_cur = want;
        setrlimit(RLIMIT_NOFILE, &r);
    }
    if (r.rlim_cur < connections + 64)
        STRATA_LOG_WARN("serve: the descriptor limit ({}) is below --max-connections ({}); raise it with ulimit -n", r.rlim_cur, connections);
}

// Without a budget the loaded models may hold this share of the machine's memory together.
constexpr double kDefaultMemoryShare = 0.9;

// The models served: the folder's (by default the model cache), with -m FILE first; -m alone
// serves that file only. The first is the default one (-m's, else the default model's when the
// folder has it).
std::vector<models::LocalModel> served_models(const ServeOptions& o) {
    std::vector<std::filesystem::path> files;
    if (!o.m.model.empty()) files.push_back(o.m.model);
    if (o.m.model.empty() || !o.models_dir.empty()) {
        const std::filesystem::path dir = o.models_dir.empty() ? models_dir() : std::filesystem::path(o.models_dir);
        for (const auto& f : models::gguf_files(dir)) files.push_back(f);
        if (o.m.model.empty()) {
            const auto preferred = std::find(files.begin(), files.end(), dir / kDefaultModelFile);
            if (preferred != files.end()) std::rotate(files.begin(), preferred, preferred + 1);
        }
    }
    if (files.empty())
        throw UsageError(fmt::format("there is no GGUF model in '{}'", o.models_dir.empty() ? models_dir().string() : o.models_dir),
                         "run scripts/fetch_model.sh for the default model, or serve a file with -m MODEL.gguf");
    if (!o.m.model.empty()) models::describe_model(o.m.model);  // a bad -m file is an error, not a skipped one
    std::vector<models::LocalModel> list = models::describe_models(files);
    if (list.empty()) throw UsageError("none of the GGUF files found is a model this server can read", "see the warnings above");
    if (!o.alias.empty()) {
        if (models::find_model(list, o.alias))
            throw UsageError(fmt::format("--alias '{}' is already the name of a model served", o.alias), "choose another alias");
        list.front().id = o.alias;
    }
    return list;
}


// Each served model's drafting engine as it loads. The default model loads at start, so a draft
// model of another vocabulary stops the server there; a model loaded later that the draft model
// does not fit speculates by prompt lookup under --spec auto (its loading fails under --spec draft).
server::DraftLoader draft_loader(const ModelOptions& m, const std::filesystem::path& default_model) {
    return [&m, default_model](const runtime::Engine& target) -> std::unique_ptr<runtime::Engine> {
        try {
            return m.load_draft_model(target);
        } catch (const UsageError& err) {
            std::error_code ec;
            if (m.spec != "auto" || std::filesystem::equivalent(target.file().path(), default_model, ec)) throw;
            STRATA_LOG_WARN("{}; {} speculates by prompt lookup", err.what(), target.file().path().filename().string());
            return nullptr;
        }
    };
}
}  // namespace

int run_serve(const ServeOptions& o) {
    // Blocked before any thread starts, so that every thread inherits the mask and the
    // signals wait for this thread's sigtimedwait instead of killing the process mid-answer.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
    signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error value, not a signal

    server::ServerConfig config;
    config.host = o.host;
    config.port = o.port;
    config.api_key = o.api_key;
    if (config.api_key.empty())
        if (const char* env = std::getenv("STRATA_API_KEY")) config.api_key = env;
    config.max_body = parse_memory_size(o.max_body);
    config.threads = o.http_threads > 0 ? o.http_threads : o.max_batch + o.max_queue + 4;
    config.timeout_s = o.timeout_s;
    config.header_timeout_s = o.header_timeout_s;
    config.max_connections = static_cast<size_t>(o.max_connections);
    config.max_connections_per_client = static_cast<size_t>(o.max_connections_per_client);
    config.max_requests_per_client = o.max_requests_per_client > 0 ? static_cast<size_t>(o.max_requests_per_client) : SIZE_MAX;
    raise_descriptor_limit(config.max_connections);

    server::RegistryOptions ro;
    ro.engine = o.m.engine();
    if (o.m.plan_prompt == 0) ro.engine.n_prompt = ModelOptions::kTurnPrompt;
    ro.models = served_models(o);
    ro.default_model = ro.models.front().id;
    ro.scheduler = runtime::SchedulerOptions{o.max_batch, o.max_queue, o.max_batch_per_client, o.max_queue_per_client};
    ro.scheduler.spec = o.m.spec_options();
    if (!o.m.draft_model.empty() || ro.scheduler.spec.mode == runtime::SpecMode::Self)
        ro.load_draft = draft_loader(o.m, ro.models.front().path);
    ro.chat_template = o.chat_template;
    ro.reasoning_budget = o.reasoning_budget;
    if (!o.pooling.empty()) ro.pooling = pooling_or(o.pooling, runtime::Pooling::Last);
    ro.budget_per_engine = ro.engine.dram_budget > 0;
    ro.memory_budget = ro.budget_per_engine ? ro.engine.dram_budget : static_cast<uint64_t>(system_ram_bytes() * kDefaultMemoryShare);
    ro.max_loaded = static_cast<size_t>(o.max_models);
    if (!o.keep_alive.empty()) {
        const auto k = ollama::parse_duration(o.keep_alive);
        if (k.count() >= 0) ro.keep_alive = k;
    }
    config.cors_origins = o.cors_origins;
    config.allowed_hosts = o.allowed_hosts;
    server::ModelRegistry registry(std::move(ro));
    // The address first: a port in use is refused before a model takes seconds to load.
    server::ApiServer api(config, registry);
    api.bind();
    std::string first_id;
    int first_ctx = 0;
    {
        // Dropped at once: the default model may be unloaded like any other. A folder's first
        // model that fails to load gives its place to the next (a named -m does not).
        announce_loading(o.m.model);
        const auto first = registry.preload_default(o.m.model.empty());
        first_id = first->info.id;
        first_ctx = first->engine->n_ctx();
    }
    if (!is_loopback(config.host) && config.api_key.empty())
        STRATA_LOG_WARN("serve: listening on {} without an API key: anyone who can reach this address can use the model "
                        "(set --api-key or STRATA_API_KEY)", config.host);
    const std::string host = config.host.find(':') != std::string::npos ? "[" + config.host + "]" : config.host;
    const size_t others = registry.available().size() - 1;
    fmt::print("strata: serving {} at http://{}:{}/v1 (context {}, batch {}, queue {}){}\n", first_id, host, api.port(),
               first_ctx, o.max_batch, o.max_queue,
               others ? fmt::format("; {} more model{} by name, loaded on demand", others, others == 1 ? "" : "s") : "");
    std::fflush(stdout);

    const pthread_t main_thread = pthread_self();
    std::atomic<bool> stopping{false};
    std::thread http([&] {
        api.run();
        if (!stopping) pthread_kill(main_thread, SIGTERM);  // the listener failed: wake the wait below
    });
    while (!wait_signal(stop_signals, std::chrono::milliseconds(1000))) {
    }
    stopping = true;
    api.stop_accepting();
    if (api.in_flight() > 0)
        fmt::print(stderr, "strata: stopping; finishing {} requests in flight (signal again to cancel them)\n", api.in_flight());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.shutdown_timeout_s);
    while (api.in_flight() > 0) {
        if (wait_signal(stop_signals, std::chrono::milliseconds(100)) || std::chrono::steady_clock::now() > deadline) {
            api.cancel_in_flight();
            break;
        }
    }
    http.join();
    registry.save_routing_stats();  // for the next plan of a mixture of experts
    fmt::print(stderr, "strata: stopped\n");
    return 0;
}

}  // namespace strata::cli
