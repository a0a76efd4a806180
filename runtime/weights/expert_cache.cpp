#include "runtime/weights/expert_cache.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "models/gguf_file.h"
#include "storage/budget.h"
#include "storage/file_io.h"
#include "storage/pinned_pool.h"
#include "storage/reader.h"

namespace strata::runtime {

namespace {

constexpr uint64_t kAlign = storage::kDefaultDioAlign;
constexpr LayerWeights::Member kParts[] = {&LayerWeights::ffn_gate_exps, &LayerWeights::ffn_up_exps,
                                           &LayerWeights::ffn_down_exps};

// The aligned file range of expert e's matrix of `w`, stopping at the end of the file.
storage::AlignedRange matrix_range(const models::GgufFile& file, const WeightRef& w, int e) {
    auto a = storage::aligned_superset(file_offset(file, w.mat(e)), w.mat_bytes(), kAlign);
    a.length = std::min<uint64_t>(a.length, file.file_size() - a.offset);
    return a;
}

// The largest aligned range of any expert's matrix in any layer (the first and last expert
// of a tensor bound the alignment slack either side).
uint64_t part_bytes(const models::GgufFile& file, const std::vector<LayerWeights>& layers) {
    uint64_t most = 0;
    for (const LayerWeights& l : layers)
        for (auto m : kParts)
            if (const WeightRef& w = l.*m; w)
                for (int64_t e = 0; e < w.n_mats; ++e)
                    most = std::max(most, storage::aligned_superset(file_offset(file, w.mat(e)), w.mat_bytes(), kAlign).length);
    return storage::align_up(most, kAlign);
}

// The cached layers that have routed experts (deepseek2's first layers are dense), and how many
// experts a layer has.
std::vector<bool> with_experts(std::vector<bool> cached, const std::vector<LayerWeights>& layers) {
    for (size_t il = 0; il < cached.size() && il < layers.size(); ++il) cached[il] = cached[il] && layers[il].ffn_gate_exps;
    return cached;
}
int experts_per_layer(const std::vector<LayerWeights>& layers) {
    int64_t n = 0;
    for (const LayerWeights& l : layers)
        if (l.ffn_gate_exps) n = std::max(n, l.ffn_gate_exps.n_mats);
    return static_cast<int>(n);
}

}  // namespace

uint64_t ExpertCache::slot_bytes(const models::GgufFile& file, const std::vector<LayerWeights>& layers) {
    return 3 * part_bytes(file, layers);
}

ExpertCache::ExpertCache(const models::GgufFile& file, storage::Reader& reader, storage::MemoryBudget& budget,
                         std::vector<LayerWeights> layers, const std::vector<bool>& cached, const ExpertCacheConfig& config,
                         std::function<void()> check_file)
    : file_(file), reader_(reader), layers_(std::move(layers)), cached_(with_experts(cached, layers_)),
      check_file_(std::move(check_file)), part_bytes_(part_bytes(file, layers_)),
      slots_(static_cast<int>(layers_.size()), experts_per_layer(layers_), config.n_slots, config.policy),
      tickets_(static_cast<size_t>(config.n_slots)), pending_(static_cast<size_t>(config.n_slots), 0),
      at_(static_cast<size_t>(config.n_slots)) {
    storage::PinnedPoolOptions po;
    po.slot_bytes = 3 * part_bytes_;
    po.n_slots = static_cast<size_t>(config.n_slots);
    po.what = "expert cache";
    pool_ = std::make_unique<storage::PinnedPool>(budget, po);
    reader_.register_region(pool_->data(), pool_->bytes());
    slots_.seed(config.seed_counts);
    // The plan's hot experts, read now rather than at their first choice.
    int n = 0;
    for (size_t il = 0; il < config.preload.size() && il < layers_.size(); ++il)
        for (int32_t e : config.preload[il]) {
            if (!holds(static_cast<int>(il)) || slots_.find(static_cast<int>(il), e) >= 0) continue;
            const int s = slots_.assign(static_cast<int>(il), e);
            if (s < 0) break;
            issue(s, static_cast<int>(il), e);
            ++n;
        }
    for (int s = 0; s < slots_.n_slots(); ++s)
        if (pending_[s]) wait_slot(s);
    slots_.unpin_all();
    stats_ = {};
    STRATA_LOG_INFO("experts: a cache of {} experts of {} each ({} policy), {} read at load",
                    config.n_slots, format_bytes(3 * part_bytes_), expert_policy_name(config.policy), n);
}

ExpertCache::~ExpertCache() {
    for (int s = 0; s < slots_.n_slots(); ++s)
        if (pending_[s]) {
            try {
                wait_slot(s);
            } catch (const Error&) {  // the reads are over either way; their slots go with the pool
            }
        }
    reader_.unregister_region(pool_->data());
}

int ExpertCache::n_slots() const { return slots_.n_slots(); }

double ExpertCache::held_share() const {
    int64_t experts = 0;
    for (size_t il = 0; il < cached_.size(); ++il)
        if (cached_[il]) experts += layers_[il].ffn_gate_exps.n_mats;
    return experts ? double(n_slots()) / double(experts) : 0;
}

std::byte* ExpertCache::part(int slot, int p) const {
    return pool_->slot_data(static_cast<size_t>(slot)) + static_cast<uint64_t>(p) * part_bytes_;
}

void ExpertCache::issue(int slot, int il, int e) {
    for (int p = 0; p < 3; ++p) {
        const WeightRef& w = layers_[il].*kParts[p];
        const storage::AlignedRange a = matrix_range(file_, w, e);
        at_[slot][p] = file_offset(file_, w.mat(e)) - a.offset;
        tickets_[slot][p] = reader_.submit({part(slot, p), a.offset, a.length});
        stats_.bytes_read += a.length;
    }
    pending_[slot] = 1;
}

void ExpertCache::wait_slot(int slot) {
    pending_[slot] = 0;
    std::optional<IoError> failed;  // every read is waited for: they all write into the slot
    for (int p = 0; p < 3; ++p) {
        try {
            reader_.wait(tickets_[slot][p]);
        } catch (const IoError& err) {
            if (!failed) failed = err;
        }
    }
    if (failed) throw *failed;
}

void ExpertCache::fetch(int il, std::span<const int32_t> experts, bool decode) {
    for (int32_t e : experts) {
        slots_.touch(il, e);
        int s = slots_.find(il, e);
        if (s >= 0) {
            slots_.pin(s);
            ++stats_.hits;
            stats_.decode_hits += decode;
            continue;
        }
        s = slots_.assign(il, e);
        if (s < 0)
            throw OutOfBudget(fmt::format("the expert cache's {} slots cannot hold the {} experts one pass of layer {} chose",
                                          slots_.n_slots(), experts.size(), il),
                              "give more --dram");
        ++stats_.misses;
        stats_.decode_misses += decode;
        issue(s, il, e);
    }
}

bool ExpertCache::ready(int il, int e) {
    const int s = slots_.find(il, e);
    if (s < 0) return false;
    return !pending_[s] || (reader_.poll(tickets_[s][0]) && reader_.poll(tickets_[s][1]) && reader_.poll(tickets_[s][2]));
}

ExpertMats ExpertCache::get(int il, int e) {
    const int s = slots_.find(il, e);
    STRATA_ASSERT(s >= 0);
    if (pending_[s]) {
        const auto t0 = std::chrono::steady_clock::now();
        try {
            wait_slot(s);
            check_file_();
        } catch (const Error&) {
            slots_.drop(s);  // what landed there is not the expert
            throw;
        }
        stats_.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    ExpertMats m{layers_[il].ffn_gate_exps.mat(e), layers_[il].ffn_up_exps.mat(e), layers_[il].ffn_down_exps.mat(e)};
    WeightRef* refs[] = {&m.gate, &m.up, &m.down};
    for (int p = 0; p < 3; ++p) refs[p]->data = part(s, p) + at_[s][p];
    return m;
}

void ExpertCache::release() {
    // A pass that failed part-way may leave reads in flight: they finish before their slots
    // can be given to other experts.
    for (int s = 0; s < slots_.n_slots(); ++s)
        if (pending_[s]) {
            try {
                wait_slot(s);
            } catch (const Error&) {
                slots_.drop(s);
            }
        }
    slots_.unpin_all();
}

}  // namespace strata::runtime
