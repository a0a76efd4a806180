#include "runtime/kv/kv_cache.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "core/bytes.h"
#include "core/error.h"
#include "core/log.h"
#include "cpu/kv_format.h"
#include "runtime/kv/kv_spill.h"
#include "storage/file_io.h"

namespace strata::runtime {

namespace {
// Bytes of one position's K (or V) row of `type`; throws UsageError for a type the cache cannot hold.
int64_t kv_row_bytes(DType type, int32_t n_embd_kv) {
    if (!cpu::is_kv_type(type))
        throw UsageError(fmt::format("{} is not a KV cache type", dtype_name(type)), fmt::format("use one of {}", cpu::kKvTypeList));
    const int64_t block = traits(type).block_elems;
    if (n_embd_kv % block != 0)
        throw UsageError(fmt::format("a {} KV cache stores rows in blocks of {} values, but this model's rows have {}",
                                     dtype_name(type), block, n_embd_kv),
                         "use --kv-type f16");
    return static_cast<int64_t>(strata::row_bytes(type, n_embd_kv));
}
// kBlockSize rows aligned to `align` bytes.
int64_t block_bytes(DType type, int32_t n_embd_kv, uint64_t align) {
    return static_cast<int64_t>(storage::align_up(uint64_t(KvCache::kBlockSize) * kv_row_bytes(type, n_embd_kv), align));
}
constexpr uint64_t kCacheLine = 64;
KvSpillOptions all_resident(int32_t n_layer) {
    KvSpillOptions o;
    o.n_resident_layers = n_layer;
    return o;
}
}  // namespace

KvCache::KvCache(int32_t n_layer, int32_t n_ctx, int32_t n_embd_kv, int32_t n_blocks, DType type)
    : KvCache(n_layer, n_ctx, n_embd_kv, all_resident(n_layer), n_blocks, type) {}

KvCache::KvCache(int32_t n_layer, int32_t n_ctx, int32_t n_embd_kv, const KvSpillOptions& spill, int32_t n_blocks,
                 DType type)
    : n_layer_(n_layer),
      n_ctx_(n_ctx),
      n_embd_kv_(n_embd_kv),
      type_(type),
      n_resident_(std::min(spill.n_resident_layers, n_layer)),
      row_bytes_(kv_row_bytes(type, n_embd_kv)),
      resident_block_bytes_(block_bytes(type, n_embd_kv, kCacheLine)),
      spill_block_bytes_(block_bytes(type, n_embd_kv, storage::kDefaultDioAlign)),
      pool_(n_blocks > 0 ? n_blocks : blocks_for(n_ctx)),
      keys_only_(spill.keys_only) {
    hidden_slot_.assign(n_layer_, -1);
    for (int32_t il = 0; il < n_layer_ && il < static_cast<int32_t>(spill.rebuilt.size()); ++il) {
        if (!spill.rebuilt[il]) continue;
        if (il >= n_resident_)
            throw UsageError(fmt::format("KV layer {} is both rebuilt from saved hidden states and spilled to disk", il),
                             "keep rebuilt layers in DRAM");
        hidden_slot_[il] = n_rebuilt_++;
    }
    if (n_rebuilt_ > 0) {
        n_embd_hidden_ = spill.n_embd_hidden;
        hidden_row_bytes_ = kv_row_bytes(type, spill.n_embd_hidden);
        hidden_block_bytes_ = block_bytes(type, spill.n_embd_hidden, kCacheLine);
    }
    // Resident layers that keep K/V get a slot each; the rebuilt ones share the one after them.
    const int32_t n_kept = n_resident_ - n_rebuilt_;
    for (int32_t il = 0, next = 0; il < n_resident_; ++il) kv_slot_.push_back(rebuilt(il) ? n_kept : next++);
    n_kv_slots_ = n_kept + (n_rebuilt_ > 0 ? 1 : 0);
    const size_t kv_bytes = kv_array_bytes();
    k_.reset(new std::byte[kv_bytes]);
    if (!keys_only_) v_.reset(new std::byte[kv_bytes]);
    h_.reset(new std::byte[size_t(hidden_block_bytes_) * pool_.n_blocks() * n_rebuilt_]);
    if (n_resident_ < n_layer_)
        spill_ = std::make_unique<KvSpill>(n_layer_ - n_resident_, pool_.n_blocks(), spill_block_bytes_, row_bytes_, spill);
    else if (spill.prefix_spill_bytes > 0)
        open_prefix_spill(spill);
}

void KvCache::open_prefix_spill(const KvSpillOptions& spill) {
    // Only a cache of evictions: a disk that cannot hold it (full, read-only) costs their reuse, not the run.
    try {
        prefix_spill_ = std::make_unique<PrefixSpill>(
            spill.dir, spill.prefix_spill_bytes,
            uint64_t(2 * resident_block_bytes_) * (n_kv_slots_ - (n_rebuilt_ > 0)) + uint64_t(hidden_block_bytes_) * n_rebuilt_);
    } catch (const IoError& e) {
        STRATA_LOG_WARN("kv: evicted prefix-cache blocks are dropped, not kept on disk: {} ({}; --prefix-spill 0 keeps none "
                        "without this warning)", e.what(), e.hint());
    }
}

KvCache::~KvCache() = default;

uint64_t KvCache::layer_bytes(int32_t n_blocks, int32_t n_embd_kv, DType type, bool keys_only) {
    return KvSpill::layer_bytes(n_blocks, block_bytes(type, n_embd_kv, storage::kDefaultDioAlign), keys_only);
}

uint64_t KvCache::resident_layer_bytes(int32_t n_blocks, int32_t n_embd_kv, DType type, bool keys_only) {
    return (keys_only ? 1 : 2) * uint64_t(n_blocks) * uint64_t(block_bytes(type, n_embd_kv, kCacheLine));
}

uint64_t KvCache::hidden_layer_bytes(int32_t n_blocks, int32_t n_embd_hidden, DType type) {
    return uint64_t(n_blocks) * block_bytes(type, n_embd_hidden, kCacheLine);
}

std::byte* KvCache::k(int32_t layer, int32_t block) {
    if (layer < n_resident_) return &k_[(size_t(kv_slot_[layer]) * pool_.n_blocks() + block) * resident_block_bytes_];
    return spill_->current(layer - n_resident_).first + block * spill_block_bytes_;
}

std::byte* KvCache::v(int32_t layer, int32_t block) {
    if (keys_only_) return k(layer, block);
    if (layer < n_resident_) return &v_[(size_t(kv_slot_[layer]) * pool_.n_blocks() + block) * resident_block_bytes_];
    return spill_->current(layer - n_resident_).second + block * spill_block_bytes_;
}

std::byte* KvCache::hidden(int32_t layer, int32_t block) {
    STRATA_ASSERT(rebuilt(layer));
    return &h_[(size_t(hidden_slot_[layer]) * pool_.n_blocks() + block) * hidden_block_bytes_];
}

void KvCache::store_hidden(int32_t layer, int32_t block, int32_t row, const float* x) {
    cpu::store_kv_row(type_, x, hidden(layer, block) + row * hidden_row_bytes_, n_embd_hidden_);
}

void KvCache::store(int32_t layer, int32_t block, int32_t row, const float* k, const float* v) {
    cpu::store_kv_row(type_, k, this->k(layer, block) + row * row_bytes_, n_embd_kv_);
    if (!keys_only_) cpu::store_kv_row(type_, v, this->v(layer, block) + row * row_bytes_, n_embd_kv_);
}

void KvCache::begin_layer(int32_t layer) {
    if (layer >= n_resident_) spill_->begin(layer - n_resident_);
    else if (spill_) spill_->poll();  // spilled layers' reads held back by their write-back
}

void KvCache::end_layer(int32_t layer, std::span<const int32_t> blocks) {
    if (layer >= n_resident_) spill_->end(layer - n_resident_, blocks);
}

KvCache::Seq& KvCache::seq(SeqId id) {
    STRATA_ASSERT(id >= 0 && id < static_cast<SeqId>(seqs_.size()) && seqs_[id].live);
    return seqs_[id];
}

const KvCache::Seq& KvCache::seq(SeqId id) const {
    STRATA_ASSERT(id >= 0 && id < static_cast<SeqId>(seqs_.size()) && seqs_[id].live);
    return seqs_[id];
}

SeqId KvCache::create_seq() {
    auto it = std::find_if(seqs_.begin(), seqs_.end(), [](const Seq& s) { return !s.live; });
    if (it == seqs_.end()) it = seqs_.insert(seqs_.end(), Seq{});
    it->live = true;
    return static_cast<SeqId>(it - seqs_.begin());
}

void KvCache::free_seq(SeqId id) {
    truncate_seq(id, 0);
    seq(id).live = false;
}

int32_t KvCache::seq_len(SeqId id) const { return static_cast<int32_t>(seq(id).tokens.size()); }
std::span<const int32_t> KvCache::block_table(SeqId id) const { return seq(id).blocks; }
std::span<const int32_t> KvCache::seq_tokens(SeqId id) const { return seq(id).tokens; }

int32_t KvCache::allocate_block() {
    std::optional<BlockKey> evicted;
    const int32_t b = pool_.allocate(prefix_spill_ ? &evicted : nullptr);
    if (b >= 0 && spill_) spill_->forget(b);  // fresh, or evicted from the prefix cache
    if (b >= 0 && evicted) {  // its content is still there: onto disk before it is overwritten
        copy_block(b, true);
        prefix_spill_->put(*evicted);
    }
    return b;
}

std::vector<std::span<std::byte>> KvCache::block_parts(int32_t block) {
    std::vector<std::span<std::byte>> parts;
    for (int32_t il = 0; il < n_layer_; ++il) {
        if (rebuilt(il)) {
            parts.emplace_back(hidden(il, block), size_t(hidden_block_bytes_));
            continue;
        }
        parts.emplace_back(k(il, block), size_t(resident_block_bytes_));
        parts.emplace_back(v(il, block), size_t(resident_block_bytes_));
    }
    return parts;
}

void KvCache::copy_block(int32_t block, bool to_staging) {
    std::byte* at = prefix_spill_->staging().data();
    for (const std::span<std::byte> part : block_parts(block)) {
        to_staging ? std::memcpy(at, part.data(), part.size()) : std::memcpy(part.data(), at, part.size());
        at += part.size();
    }
}

int32_t KvCache::restore_block(const BlockKey& key) {
    if (!prefix_spill_ || !prefix_spill_->contains(key)) return -1;
    const int32_t b = allocate_block();  // may itself evict (and spill) another cached block
    if (b < 0) return -1;
    prefix_spill_->take(key);
    copy_block(b, false);
    pool_.publish(b, key);
    ++n_prefix_restored_;
    return b;
}

int32_t KvCache::n_prefix_spilled() const { return prefix_spill_ ? prefix_spill_->n_held() : 0; }

void KvCache::release_block(int32_t block) {
    pool_.release(block);
    if (spill_ && pool_.ref_count(block) == 0 && !pool_.is_cached(block)) spill_->forget(block);
}

int32_t KvCache::attach_prefix(SeqId id, std::span<const int32_t> tokens) {
    Seq& s = seq(id);
    STRATA_ASSERT(s.tokens.empty());
    const size_t n_full = tokens.empty() ? 0 : (tokens.size() - 1) / kBlockSize;
    uint64_t parent = 0;
    for (size_t i = 0; i < n_full; ++i) {
        const BlockKey key = block_key(parent, tokens.subspan(i * kBlockSize, kBlockSize));
        int32_t b = pool_.find(key);
        if (b < 0) b = restore_block(key);
        if (b < 0) break;
        s.blocks.push_back(b);
        s.hashes.push_back(key.hash);
        s.tokens.insert(s.tokens.end(), key.tokens.begin(), key.tokens.end());
        parent = key.hash;
    }
    return static_cast<int32_t>(s.tokens.size());
}

std::vector<KvCache::BlockCopy> KvCache::unshare(SeqId id) {
    STRATA_ASSERT(n_spilled() == 0);
    Seq& s = seq(id);
    std::vector<BlockCopy> copies;
    for (size_t i = 0; i < s.blocks.size(); ++i) {
        const int32_t from = s.blocks[i];
        if (pool_.ref_count(from) == 1) continue;
        const int32_t to = allocate_block();
        if (to < 0) {
            truncate_seq(id, static_cast<int32_t>(i) * kBlockSize);
            break;
        }
        const auto src = block_parts(from), dst = block_parts(to);
        for (size_t p = 0; p < src.size(); ++p) std::memcpy(dst[p].data(), src[p].data(), src[p].size());
        release_block(from);
        s.blocks[i] = to;
        copies.push_back({from, to});
    }
    return copies;
}

int32_t KvCache::blocks_needed(SeqId id, int32_t n_total) const {
    return std::max(0, blocks_for(n_total) - static_cast<int32_t>(seq(id).blocks.size()));
}

bool KvCache::reserve(SeqId id, int32_t n) {
    Seq& s = seq(id);
    if (static_cast<int64_t>(s.tokens.size()) + n > n_ctx_)
        throw UsageError(fmt::format("context is full: {} tokens in the cache + {} new > context size {}", s.tokens.size(), n,
                                     n_ctx_),
                         "use a shorter prompt, fewer tokens (-n) or a larger context (--ctx)");
    for (int32_t need = blocks_needed(id, static_cast<int32_t>(s.tokens.size()) + n); need > 0; --need) {
        const int32_t b = allocate_block();
        if (b < 0) return false;
        s.blocks.push_back(b);
    }
    return true;
}

void KvCache::commit(SeqId id, std::span<const int32_t> tokens) {
    Seq& s = seq(id);
    STRATA_ASSERT(blocks_for(static_cast<int64_t>(s.tokens.size() + tokens.size())) <= static_cast<int32_t>(s.blocks.size()));
    s.tokens.insert(s.tokens.end(), tokens.begin(), tokens.end());
    for (size_t i = s.hashes.size(); (i + 1) * kBlockSize <= s.tokens.size(); ++i) {
        const BlockKey key = block_key(i ? s.hashes[i - 1] : 0, std::span(s.tokens).subspan(i * kBlockSize, kBlockSize));
        pool_.publish(s.blocks[i], key);
        s.hashes.push_back(key.hash);
    }
}

void KvCache::keep_path(SeqId id, std::span<const int64_t> slots, std::span<const int32_t> tokens) {
    STRATA_ASSERT(slots.size() == tokens.size() && n_rebuilt_ == 0);
    const Seq& s = seq(id);
    const auto base = static_cast<int64_t>(s.tokens.size());
    auto at = [&](std::byte* (KvCache::*rows)(int32_t, int32_t), int32_t il, int64_t p) {
        return (this->*rows)(il, s.blocks[size_t(p / kBlockSize)]) + (p % kBlockSize) * row_bytes_;
    };
    std::vector<RowMove> spilled;  // made by each spilled layer when it is next begun
    for (size_t i = 0; i < slots.size(); ++i) {
        const int64_t from = base + slots[i], to = base + int64_t(i);
        STRATA_ASSERT(from >= to && from / kBlockSize < int64_t(s.blocks.size()));
        if (from == to) continue;
        for (int32_t il = 0; il < n_resident_; ++il) {
            std::memmove(at(&KvCache::k, il, to), at(&KvCache::k, il, from), size_t(row_bytes_));
            if (!keys_only_) std::memmove(at(&KvCache::v, il, to), at(&KvCache::v, il, from), size_t(row_bytes_));
        }
        spilled.push_back({s.blocks[size_t(from / kBlockSize)], int32_t(from % kBlockSize), s.blocks[size_t(to / kBlockSize)],
                           int32_t(to % kBlockSize)});
    }
    if (spill_ && !spilled.empty()) spill_->move_rows(spilled);
    commit(id, tokens);
    truncate_seq(id, static_cast<int32_t>(base + int64_t(tokens.size())));
}

int32_t KvCache::truncate_seq(SeqId id, int32_t n) {
    Seq& s = seq(id);
    n = std::clamp<int32_t>(n, 0, static_cast<int32_t>(s.tokens.size()));
    int32_t keep_blocks = blocks_for(n);
    // The block that position n falls in will be written again: it must be this sequence's
    // alone and no longer cached under its old tokens.
    if (n % kBlockSize != 0) {
        const int32_t b = s.blocks[keep_blocks - 1];
        if (pool_.ref_count(b) > 1) {
            --keep_blocks;
            n = keep_blocks * kBlockSize;
        } else {
            pool_.unpublish(b);
        }
    }
    for (size_t i = keep_blocks; i < s.blocks.size(); ++i) release_block(s.blocks[i]);
    s.blocks.resize(keep_blocks);
    s.tokens.resize(n);
    s.hashes.resize(std::min<size_t>(s.hashes.size(), n / kBlockSize));
    return n;
}

uint64_t KvCache::bytes() const {
    const uint64_t rows = keys_only_ ? 1 : 2;
    return (rows * resident_block_bytes_ * n_kv_slots_ + uint64_t(hidden_block_bytes_) * n_rebuilt_) * pool_.n_blocks();
}

uint64_t KvCache::layers_bytes(const std::vector<bool>& layers) const {
    std::vector<bool> resident(layers.begin(), layers.begin() + std::min<ptrdiff_t>(n_resident_, ptrdiff_t(layers.size())));
    std::vector<bool> rebuilt_layers(resident.size());
    for (size_t il = 0; il < resident.size(); ++il) rebuilt_layers[il] = rebuilt(int32_t(il));
    return layers_bytes(resident, rebuilt_layers, (keys_only_ ? 1 : 2) * uint64_t(resident_block_bytes_) * pool_.n_blocks(),
                        uint64_t(hidden_block_bytes_) * pool_.n_blocks());
}

uint64_t KvCache::layers_bytes(const std::vector<bool>& layers, const std::vector<bool>& rebuilt, uint64_t pair,
                               uint64_t hidden) {
    uint64_t sum = 0;
    bool rebuilt_counted = false;
    for (size_t il = 0; il < layers.size(); ++il) {
        if (!layers[il]) continue;
        const bool r = il < rebuilt.size() && rebuilt[il];
        rebuilt_counted = rebuilt_counted || r;
        sum += r ? hidden : pair;
    }
    return sum + (rebuilt_counted ? pair : 0);
}

uint64_t KvCache::pin_resident(std::shared_ptr<storage::HostPinner> pinner) {
    if (!pinner || !pinned_.empty() || kv_array_bytes() == 0) return 0;
    for (std::byte* base : {k_.get(), v_.get()}) {
        if (!base) continue;  // keys only
        const storage::PinnedRange& r = pinned_.emplace_back(pinner, base, kv_array_bytes());
        if (r.registered()) continue;
        STRATA_LOG_WARN("kv: {} of the KV cache ({}) failed ({}); the device's copies of its blocks are staged by the "
                        "driver and slower", pinner->name(), format_bytes(kv_array_bytes()), r.why_not());
        pinned_.clear();
        return 0;
    }
    const uint64_t pinned = uint64_t(kv_array_bytes()) * pinned_.size();
    STRATA_LOG_INFO("kv: {} of resident K/V page-locked by {} for the device's copies", format_bytes(pinned), pinner->name());
    return pinned;
}

uint64_t KvCache::spill_buffer_bytes() const { return spill_ ? spill_->buffer_bytes() : 0; }

int32_t KvCache::n_spilled() const { return n_layer_ - n_resident_; }

void KvCache::set_trace(Trace* trace) {
    if (spill_) spill_->set_trace(trace);
}

}  // namespace strata::runtime
