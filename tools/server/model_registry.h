#pragma once
// The models a server answers for, by name: every GGUF of the models folder (or the one file of
// `-m`), described from their headers, and those loaded, each its own engine and scheduler. A
// request for a model that is not loaded loads it, first unloading the least recently used idle
// models until it fits the memory budget (and --max-models); a model stays loaded for its
// keep-alive after its last request (Ollama's keep_alive), then a reaper thread unloads it.
// A request holds its model (a lease) until it is answered, so a model in use is never unloaded.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "models/chat_template.h"
#include "models/model_dir.h"
#include "runtime/engine.h"
#include "runtime/scheduler.h"
#include "tools/openai/request.h"

namespace strata::server {

using Clock = std::chrono::steady_clock;

// The engine that drafts for a model's requests, loaded beside it (the draft model, or the
// model's first layers for --spec self), or null to speculate without one.
using DraftLoader = std::function<std::unique_ptr<runtime::Engine>(const runtime::Engine& target)>;

// One model ready to serve; what a request leases.
struct LoadedModel {
    LoadedModel(const models::LocalModel& info, const runtime::EngineOptions& eo, const std::string& chat_template,
                const std::optional<runtime::Pooling>& pooling, runtime::SchedulerOptions so, const DraftLoader& load_draft);
    models::LocalModel info;
    std::unique_ptr<runtime::Engine> engine;
    std::unique_ptr<runtime::Engine> draft;  // what drafts for its requests (--draft-model, --spec self), or null
    models::ChatTemplate chat_template;
    openai::ModelContext context;  // refers to the engine's tokenizer and chat_template
    std::unique_ptr<runtime::Scheduler> scheduler;
    double load_seconds = 0;
    uint64_t estimated_bytes = 0;  // its file and KV cache, as counted before it loaded
    // What its engine has reserved, or at least its file and KV cache (weights mapped from the
    // file may be resident without a reservation), and its drafting engine's where the engine
    // holds no share of its budget for it (no --dram).
    uint64_t memory_bytes() const {
        const bool draft_apart = draft && engine->dram_beside() == 0;
        return std::max(engine->dram().used(), estimated_bytes) + (draft_apart ? draft->dram().used() : 0);
    }
};

struct RegistryOptions {
    std::vector<models::LocalModel> models;  // what may be loaded
    std::string default_model;               // the id a request without `model` gets
    runtime::EngineOptions engine;           // each model's (its path set per model)
    runtime::SchedulerOptions scheduler;
    DraftLoader load_draft;                  // each model's drafting engine as it loads; empty: none
    std::string chat_template;               // --chat-template: every model's, when given
    runtime::ReasoningBudgetParams reasoning_budget;  // --reasoning-budget: every model's requests' default
    std::optional<runtime::Pooling> pooling; // --pooling; nullopt: each model's own
    uint64_t memory_budget = 0;              // what loaded models may hold together
    bool budget_per_engine = false;          // --dram given: each engine also gets what the others leave
    size_t max_loaded = 0;                   // 0: as many as the budget holds
    // How long a model stays loaded after its last request; nullopt: until memory needs it.
    std::optional<std::chrono::seconds> keep_alive;
};

class ModelRegistry {
public:
    explicit ModelRegistry(RegistryOptions options);
    ~ModelRegistry();  // stops the reaper; the models unload
    ModelRegistry(const ModelRegistry&) = delete;
    ModelRegistry& operator=(const ModelRegistry&) = delete;

    // Every model that may be served, loaded or not, by id.
    const std::vector<models::LocalModel>& available() const { return options_.models; }
    // The model `name` names (empty: the default one); nullptr when none.
    const models::LocalModel* find(const std::string& name) const;

    // The model named, loaded if it is not; held until the lease is dropped. `keep_alive`
    // (nullopt: the server's) restarts its clock. Throws ApiError 404 (model_not_found) for a
    // name that names none, 503 (model_busy) when it cannot fit beside models that are answering
    // requests, and 500 when it fails to load.
    std::shared_ptr<LoadedModel> acquire(const std::string& name, std::optional<std::chrono::seconds> keep_alive = {});
    // The default model, loaded at start; a model that fails to load throws its own Error.
    // With `fall_back` (the default was picked from a folder, not named), one that fails is
    // warned about and the next model that loads becomes the default; the error is thrown when
    // none does.
    std::shared_ptr<LoadedModel> preload_default(bool fall_back = false);
    // Unloads the named model once its requests are answered (keep_alive 0); false when it is not loaded.
    bool unload_when_idle(const std::string& name);

    struct Loaded {
        std::shared_ptr<LoadedModel> model;
        std::optional<Clock::time_point> expires;  // nullopt: never
    };
    // The models loaded now, most recently used first.
    std::vector<Loaded> loaded() const;
    // The default model when loaded (for the planner page's engine view); else null.
    std::shared_ptr<LoadedModel> default_if_loaded() const;
    // Summed over the loaded models and those unloaded before (whose counters go on counting here).
    runtime::SchedulerStats stats() const;
    uint64_t memory_used() const;               // DRAM the loaded engines hold (at least their files and KV caches)
    uint64_t memory_peak() const;               // the most each loaded engine has held, summed
    uint64_t memory_budget() const { return options_.memory_budget; }
    const std::string& chat_template() const { return options_.chat_template; }  // --chat-template, or empty
    // Each loaded model saves what its experts' routing taught (for the next plan).
    void save_routing_stats() const;

private:
    struct Slot {
        std::shared_ptr<LoadedModel> model;
        Clock::time_point last_used;
        std::optional<Clock::time_point> expires;
        bool unload_when_idle = false;
    };
    // The model leased, loaded first when it is not (throws Error when it fails to load).
    std::shared_ptr<LoadedModel> lease(const models::LocalModel& m, std::optional<std::chrono::seconds> keep_alive);
    // Under mu_: unloads idle models, least recently used first, until `need` more bytes fit and a slot is free.
    void make_room(uint64_t need, std::unique_lock<std::mutex>& lock);
    // Under mu_: what the loaded models hold.
    uint64_t used_locked() const;
    // Under mu_: a model's memory before it loads: its file and its KV cache at its context.
    uint64_t estimate(const models::LocalModel& m) const;
    void reap();
    // Under mu_ (released while the engine goes): unloads the model in `slots_[i]`, keeping its
    // scheduler's counters (not its gauges) in retired_.
    void unload(size_t i, const char* why, std::unique_lock<std::mutex>& lock);

    RegistryOptions options_;
    mutable std::mutex mu_;
    std::mutex load_mu_;  // one load at a time: two requests for one model load it once
    std::vector<Slot> slots_;
    runtime::SchedulerStats retired_;  // what unloaded models' schedulers had done
    std::condition_variable wake_;
    bool stopping_ = false;
    std::thread reaper_;
};

}  // namespace strata::server
