#include "tools/server/model_registry.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/bytes.h"
#include "core/error.h"
#include "core/log.h"
#include "core/memory_release.h"
#include "planner/model_shape.h"
#include "tools/openai/model_list.h"

namespace strata::server {

namespace {
// How often the reaper looks for models whose keep-alive has run out.
constexpr auto kReapEvery = std::chrono::milliseconds(250);

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

runtime::SchedulerOptions with_draft(runtime::SchedulerOptions so, runtime::Engine* draft) {
    so.spec.draft_model = draft;
    return so;
}
}  // namespace

LoadedModel::LoadedModel(const models::LocalModel& m, const runtime::EngineOptions& eo, const std::string& tmpl,
                         const std::optional<runtime::Pooling>& pooling, runtime::SchedulerOptions so,
                         const DraftLoader& load_draft)
    : info(m),
      engine(std::make_unique<runtime::Engine>(eo)),
      draft(load_draft ? load_draft(*engine) : nullptr),
      chat_template(models::ChatTemplate::from_gguf(engine->file(), tmpl)),
      context{engine->tokenizer(), chat_template, engine->n_ctx(), m.id, pooling.value_or(engine->pooling()),
              engine->hparams().n_embd, engine->placement().plan.to_json()},
      scheduler(std::make_unique<runtime::Scheduler>(*engine, with_draft(so, draft.get()))) {
    // A draft model that does not fit this model (it speculates by lookup) leaves its share to the others.
    if (!draft) engine->release_draft_share();
}

ModelRegistry::ModelRegistry(RegistryOptions options) : options_(std::move(options)) {
    reaper_ = std::thread([this] { reap(); });
}

ModelRegistry::~ModelRegistry() {
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
    }
    wake_.notify_all();
    reaper_.join();
}

const models::LocalModel* ModelRegistry::find(const std::string& name) const {
    return models::find_model(options_.models, name.empty() ? options_.default_model : name);
}

uint64_t ModelRegistry::used_locked() const {
    uint64_t used = 0;
    for (const Slot& s : slots_) used += s.model->memory_bytes();
    return used;
}

uint64_t ModelRegistry::estimate(const models::LocalModel& m) const {
    try {
        planner::ModelShape shape = planner::ModelShape::from_gguf(m.path);
        shape.kv_type = options_.engine.kv_type;
        const int n_ctx = runtime::context_size(options_.engine.n_ctx, shape.n_ctx_train);
        return m.size_bytes + static_cast<uint64_t>(shape.kv_bytes_per_token() * shape.n_layer * n_ctx);
    } catch (const Error&) {
        return m.size_bytes;  // the load will say what is wrong with it
    }
}

void ModelRegistry::make_room(uint64_t need, std::unique_lock<std::mutex>& lock) {
    const auto over = [&] {
        const bool full = options_.max_loaded > 0 && slots_.size() >= options_.max_loaded;
        return full || used_locked() + need > options_.memory_budget;
    };
    while (!slots_.empty() && over()) {
        // The least recently used model no request holds.
        auto victim = slots_.end();
        for (auto it = slots_.begin(); it != slots_.end(); ++it)
            if (it->model.use_count() == 1 && (victim == slots_.end() || it->last_used < victim->last_used)) victim = it;
        if (victim == slots_.end()) return;  // all busy: the caller decides
        unload(static_cast<size_t>(victim - slots_.begin()), "to make room", lock);
    }
}

void ModelRegistry::unload(size_t i, const char* why, std::unique_lock<std::mutex>& lock) {
    std::shared_ptr<LoadedModel> gone = std::move(slots_[i].model);
    slots_.erase(slots_.begin() + static_cast<std::ptrdiff_t>(i));
    retired_ += gone->scheduler->stats().counters();
    STRATA_LOG_INFO("models: unloading {} {}", gone->info.id, why);
    lock.unlock();
    gone.reset();  // the engine's threads and memory go here, outside the lock
    // The allocator keeps what the engine's threads freed in their arenas; without this a
    // server that loads and unloads models grows by about 20 MB each time.
    release_freed_memory();
    lock.lock();
}

std::shared_ptr<LoadedModel> ModelRegistry::acquire(const std::string& name, std::optional<std::chrono::seconds> keep_alive) {
    const models::LocalModel* m = find(name);
    if (!m) throw openai::model_not_found(name);
    try {
        return lease(*m, keep_alive);
    } catch (const Error& e) {
        throw openai::ApiError(500, fmt::format("the model '{}' failed to load: {}", m->id, e.what()), "server_error", "model",
                               "model_load_failed");
    }
}

std::shared_ptr<LoadedModel> ModelRegistry::preload_default(bool fall_back) {
    const models::LocalModel* m = find({});
    if (!m) throw UsageError(fmt::format("the default model '{}' is not among the models served", options_.default_model));
    try {
        return lease(*m, std::nullopt);
    } catch (const UsageError&) {
        throw;  // the options (a draft model of another vocabulary), not the file: every model would fail
    } catch (const Error& first) {
        if (!fall_back) throw;
        // Called before the server answers anyone: the default may still change.
        for (const models::LocalModel& other : options_.models) {
            if (other.id == m->id) continue;
            try {
                auto loaded = lease(other, std::nullopt);
                STRATA_LOG_WARN("models: {} failed to load ({}); {} is the default model instead", m->id, first.what(), other.id);
                options_.default_model = other.id;
                return loaded;
            } catch (const Error& e) {
                STRATA_LOG_WARN("models: {} failed to load too: {}", other.id, e.what());
            }
        }
        throw;
    }
}

std::shared_ptr<LoadedModel> ModelRegistry::lease(const models::LocalModel& m, std::optional<std::chrono::seconds> keep_alive) {
    const auto take = [&](Slot& s) {
        s.last_used = Clock::now();
        const auto k = keep_alive ? keep_alive : options_.keep_alive;
        s.expires = k && k->count() >= 0 ? std::optional(Clock::now() + *k) : std::nullopt;
        s.unload_when_idle = keep_alive && keep_alive->count() == 0;
        return s.model;
    };
    const auto loaded_slot = [&]() -> Slot* {
        for (Slot& s : slots_)
            if (s.model->info.id == m.id) return &s;
        return nullptr;
    };
    {
        std::lock_guard lock(mu_);
        if (Slot* s = loaded_slot()) return take(*s);
    }
    std::lock_guard loading(load_mu_);
    std::unique_lock lock(mu_);
    if (Slot* s = loaded_slot()) return take(*s);  // another request loaded it meanwhile
    const uint64_t need = estimate(m);
    make_room(need, lock);
    const bool full = options_.max_loaded > 0 && slots_.size() >= options_.max_loaded;
    const uint64_t used = used_locked();
    if (!slots_.empty() && (full || used + need > options_.memory_budget))
        throw openai::ApiError(503,
                               fmt::format("loading '{}' needs about {} beside the {} the loaded models hold (budget {}), and "
                                           "they are answering requests; retry once they finish",
                                           m.id, format_bytes(need), format_bytes(used), format_bytes(options_.memory_budget)),
                               "server_error", "model", "model_busy");
    runtime::EngineOptions eo = options_.engine;
    eo.model = m.path;
    if (options_.budget_per_engine) eo.dram_budget = options_.memory_budget - std::min(used, options_.memory_budget);
    lock.unlock();
    const auto started = Clock::now();
    auto model = std::make_shared<LoadedModel>(m, eo, options_.chat_template, options_.pooling, options_.scheduler,
                                               options_.load_draft);
    model->context.reasoning_budget = options_.reasoning_budget;
    model->load_seconds = seconds_since(started);
    model->estimated_bytes = need;
    STRATA_LOG_INFO("models: loaded {} in {:.2f} s ({} of DRAM)", m.id, model->load_seconds, format_bytes(model->engine->dram().used()));
    lock.lock();
    slots_.push_back(Slot{model, Clock::now(), std::nullopt, false});
    return take(slots_.back());
}

bool ModelRegistry::unload_when_idle(const std::string& name) {
    const models::LocalModel* m = find(name);
    std::lock_guard lock(mu_);
    for (Slot& s : slots_)
        if (m && s.model->info.id == m->id) {
            s.unload_when_idle = true;
            wake_.notify_all();
            return true;
        }
    return false;
}

std::vector<ModelRegistry::Loaded> ModelRegistry::loaded() const {
    std::lock_guard lock(mu_);
    std::vector<const Slot*> order;
    for (const Slot& s : slots_) order.push_back(&s);
    std::sort(order.begin(), order.end(), [](const Slot* a, const Slot* b) { return a->last_used > b->last_used; });
    std::vector<Loaded> out;
    for (const Slot* s : order) out.push_back({s->model, s->expires});
    return out;
}

std::shared_ptr<LoadedModel> ModelRegistry::default_if_loaded() const {
    const models::LocalModel* m = find({});
    std::lock_guard lock(mu_);
    for (const Slot& s : slots_)
        if (m && s.model->info.id == m->id) return s.model;
    return nullptr;
}

runtime::SchedulerStats ModelRegistry::stats() const {
    // The unloaded models' counters and the loaded ones, taken together: a model unloaded
    // between the two would be counted in neither, and the counters would dip.
    runtime::SchedulerStats sum;
    std::vector<std::shared_ptr<LoadedModel>> live;
    {
        std::lock_guard lock(mu_);
        sum = retired_;
        for (const Slot& s : slots_) live.push_back(s.model);
    }
    for (const auto& m : live) sum += m->scheduler->stats();
    return sum;
}

uint64_t ModelRegistry::memory_used() const {
    std::lock_guard lock(mu_);
    return used_locked();
}

uint64_t ModelRegistry::memory_peak() const {
    std::lock_guard lock(mu_);
    uint64_t peak = 0;
    for (const Slot& s : slots_) peak += s.model->engine->dram().peak();
    return peak;
}

void ModelRegistry::save_routing_stats() const {
    for (const Loaded& l : loaded()) l.model->engine->save_routing_stats();
}

void ModelRegistry::reap() {
    std::unique_lock lock(mu_);
    while (!stopping_) {
        wake_.wait_for(lock, kReapEvery);
        const auto now = Clock::now();
        for (auto it = slots_.begin(); it != slots_.end();) {
            const bool due = it->unload_when_idle || (it->expires && *it->expires <= now);
            if (!due || it->model.use_count() > 1) {
                ++it;
                continue;
            }
            unload(static_cast<size_t>(it - slots_.begin()), "(its keep-alive ran out)", lock);
            it = slots_.begin();  // the list may have changed meanwhile
        }
    }
}

}  // namespace strata::server
