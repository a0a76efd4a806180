#include "runtime/weights/weight_store.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "core/trace.h"
#include "cpu/quant.h"
#include "gpu/cuda_host.h"
#include "models/gguf_file.h"
#include "runtime/weights/expert_cache.h"
#include "runtime/weights/file_layout.h"
#include "runtime/weights/stream_ring.h"
#include "storage/budget.h"
#include "storage/file_io.h"
#include "storage/pinned_pool.h"
#include "storage/reader.h"

namespace strata::runtime {

namespace {

std::vector<WeightRef*> refs(LayerWeights& l) {
    std::vector<WeightRef*> out;
    for (auto m : LayerWeights::kAll)
        if (l.*m) out.push_back(&(l.*m));
    return out;
}

// The aligned file range covering every tensor of a layer.
storage::AlignedRange layer_extent(const models::GgufFile& file, LayerWeights& layer) {
    uint64_t lo = UINT64_MAX, hi = 0;
    for (WeightRef* r : refs(layer)) {
        lo = std::min(lo, file_offset(file, *r));
        hi = std::max(hi, file_offset(file, *r) + r->bytes());
    }
    return storage::aligned_superset(lo, hi - lo, storage::kDefaultDioAlign);
}

bool is_expert(const LayerWeights& l, const WeightRef* r) {
    return r == &l.ffn_gate_exps || r == &l.ffn_up_exps || r == &l.ffn_down_exps;
}

// A layer's tensors but its routed experts, each in its own aligned file range (what stays
// resident when the experts are cached), one range per tensor.
std::map<const models::TensorInfo*, std::vector<WeightRef*>> dense_tensors(LayerWeights& layer) {
    std::map<const models::TensorInfo*, std::vector<WeightRef*>> out;
    for (auto m : LayerWeights::kAll)
        if (WeightRef& r = layer.*m; r && !is_expert(layer, &r)) out[r.info].push_back(&r);
    return out;
}

uint64_t dense_bytes(const models::GgufFile& file, LayerWeights& layer) {
    uint64_t b = 0;
    for (const auto& [info, views] : dense_tensors(layer))
        b += storage::align_up(storage::aligned_superset(file.file_offset(*info), info->nbytes, storage::kDefaultDioAlign).length,
                               storage::kDefaultDioAlign);
    return b;
}

uint64_t fixed_bytes(const ModelWeights& w) {
    std::set<const models::TensorInfo*> seen;
    uint64_t b = 0;
    for (const WeightRef* r : w.fixed())
        if (*r && seen.insert(r->info).second) b += r->info->nbytes;
    return b;
}

}  // namespace

// The reader's one staging buffer (ReaderOptions::chunk_bytes) for the file's unaligned tail.
constexpr uint64_t kStagingBytes = uint64_t{1} << 20;

struct WeightStore::Reserved {
    storage::Reservation resident;
    std::vector<storage::Reservation> moved;  // layers moved off the device (run_on_cpu)
};

// What the model file was at load; a streamed read from a file that has changed since
// would mix two files' bytes.
struct WeightStore::FileIdentity {
    uint64_t size = 0;
    timespec mtime{};

    static FileIdentity of(int fd, const std::filesystem::path& path) {
        struct stat st{};
        if (fstat(fd, &st) != 0)
            throw IoError(fmt::format("cannot stat model file '{}': {}", path.string(), std::strerror(errno)));
        return {static_cast<uint64_t>(st.st_size), st.st_mtim};
    }
    bool operator==(const FileIdentity& o) const {
        return size == o.size && mtime.tv_sec == o.mtime.tv_sec && mtime.tv_nsec == o.mtime.tv_nsec;
    }
};

// Private anonymous pages with transparent huge pages where the kernel allows.
struct WeightStore::AnonymousMemory {
    std::byte* base = nullptr;
    size_t bytes = 0;

    explicit AnonymousMemory(size_t n) : bytes(n) {
        void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
            throw IoError(fmt::format("cannot allocate {} for the resident model weights: {}", format_bytes(n),
                                      std::strerror(errno)),
                          "free memory, or set --dram to stream the layers that do not fit");
        base = static_cast<std::byte*>(p);
        ::madvise(p, n, MADV_HUGEPAGE);
        // With a GPU the resident layers it does not hold are copied to it each pass: page-locked,
        // at full PCIe speed (best effort: without it the copies are only slower).
        if (auto pinner = storage::host_pinner()) {
            const std::string why = pinner->register_memory(base, bytes);
            if (why.empty()) pinner_ = std::move(pinner);
            else STRATA_LOG_WARN("weights: {} of the resident weights failed ({}); copies to the GPU will be slower",
                                 pinner->name(), why);
        }
    }
    ~AnonymousMemory() {
        if (pinner_) pinner_->unregister_memory(base, bytes);
        ::munmap(base, bytes);
    }
    std::shared_ptr<storage::HostPinner> pinner_;
    AnonymousMemory(const AnonymousMemory&) = delete;
    AnonymousMemory& operator=(const AnonymousMemory&) = delete;
};

ResidencyInput WeightStore::residency_input(const models::GgufFile& file, const models::Hparams& hp,
                                           const storage::MemoryBudget& budget, uint64_t other_bytes, int prefetch_depth) {
    ModelWeights w = ModelWeights::bind(file, hp);
    ResidencyInput in;
    in.budget = budget.limit() == UINT64_MAX ? 0 : budget.limit();  // UINT64_MAX: no --dram given
    in.fixed_bytes = fixed_bytes(w);
    in.other_bytes = other_bytes + kStagingBytes;
    in.prefetch_depth = prefetch_depth;
    for (LayerWeights& layer : w.layers) in.layer_bytes.push_back(layer_extent(file, layer).length);
    if (hp.moe.enabled()) {
        for (LayerWeights& layer : w.layers) in.dense_bytes.push_back(dense_bytes(file, layer));
        in.expert_slot_bytes = ExpertCache::slot_bytes(file, w.layers);
        in.n_expert = hp.moe.n_expert;
    }
    return in;
}

WeightStore::WeightStore(const models::GgufFile& file, const models::Hparams& hp, storage::MemoryBudget& budget,
                         Residency residency)
    : file_(file), weights_(ModelWeights::bind(file, hp)), residency_(std::move(residency)), budget_(budget),
      reserved_(std::make_unique<Reserved>()) {
    for (LayerWeights& layer : weights_.layers) {
        const auto a = layer_extent(file, layer);
        // The last layer's aligned end may pass the end of the file: stop at the end.
        ranges_.push_back({a.offset, std::min(a.length, file.file_size() - a.offset)});
    }
    reserved_->resident = storage::Reservation(budget, residency_.resident_bytes, "resident model weights");

    for (size_t il = 0; il < weights_.layers.size(); ++il)
        if (residency_.streamed(static_cast<int>(il))) streamed_.push_back(static_cast<int>(il));

    // One reader for the load and the streaming, so STRATA_FAULT_IO counts every weight read.
    auto f = storage::File::open_read(file.path(), storage::OpenMode::DirectOrBuffered);
    identity_ = std::make_unique<FileIdentity>(FileIdentity::of(f.fd(), file.path()));
    storage::ReaderOptions ro;
    if (residency_.read_chunks > 0) ro.queue_depth = residency_.read_chunks;
    ro.staging_slots = 1;  // only the file's unaligned tail goes through staging
    ro.staging_budget = &budget;
    reader_ = storage::open_reader(f, ro);
    const std::vector<LayerWeights> file_views = weights_.layers;
    load_resident();
    if (residency_.experts.n_slots > 0)
        experts_ = std::make_unique<ExpertCache>(file, *reader_, budget, file_views, residency_.experts_cached,
                                                 residency_.experts, [this] { check_file_unchanged(); });

    if (streamed_.empty()) return;
    // With a GPU, the ring is also registered with CUDA so layers can go on to the device.
    [[maybe_unused]] static const bool gpu_pinned = gpu::install_cuda_host_pinner();  // read by the debug log only
    STRATA_LOG_DEBUG("weights: streaming buffers {} registered with CUDA", gpu_pinned ? "are" : "are not");
    storage::PinnedPoolOptions po;
    po.slot_bytes = residency_.slot_bytes;
    po.n_slots = static_cast<size_t>(residency_.n_slots);
    po.what = "weight streaming buffers";
    ring_ = std::make_unique<storage::PinnedPool>(budget, po);
    reader_->register_region(ring_->data(), ring_->bytes());
    stream_ = make_stream(*ring_, streamed_, "weights");
    STRATA_LOG_INFO("weights: {} of {} layers resident ({}), {} streamed from {} through {} x {} buffers ({} reader, {} reads of {} in flight)",
                    weights_.layers.size() - streamed_.size(), weights_.layers.size(),
                    format_bytes(residency_.resident_bytes), streamed_.size(), file.path().string(),
                    ring_->n_slots(), format_bytes(residency_.slot_bytes), reader_->backend(), ro.queue_depth,
                    format_bytes(ro.chunk_bytes));
}

void WeightStore::load_resident() {
    constexpr uint64_t kAlign = storage::kDefaultDioAlign;
    // Each piece is an aligned file range read into its own place; the tensors inside point
    // into it. The fixed tensors (tied output = embeddings: one piece) and each resident layer.
    struct Piece {
        uint64_t offset = 0, length = 0, at = 0;
        std::vector<WeightRef*> refs;
    };
    std::vector<Piece> pieces;
    std::map<const models::TensorInfo*, size_t> fixed;
    for (WeightRef* r : weights_.fixed()) {
        if (!*r) continue;
        if (auto it = fixed.find(r->info); it != fixed.end()) {
            pieces[it->second].refs.push_back(r);
            continue;
        }
        const auto a = storage::aligned_superset(file_.file_offset(*r->info), r->info->nbytes, kAlign);
        fixed[r->info] = pieces.size();
        pieces.push_back({a.offset, std::min(a.length, file_.file_size() - a.offset), 0, {r}});
    }
    const size_t first_layer_piece = pieces.size();
    for (size_t il = 0; il < weights_.layers.size(); ++il)
        if (residency_.resident[il] && !residency_.cached_experts(static_cast<int>(il)))
            pieces.push_back({ranges_[il].offset, ranges_[il].length, 0, refs(weights_.layers[il])});
    // Layers whose experts are cached: each other tensor on its own; the experts are not held here.
    for (size_t il = 0; il < weights_.layers.size(); ++il) {
        if (!residency_.cached_experts(static_cast<int>(il))) continue;
        LayerWeights& l = weights_.layers[il];
        for (auto& [info, views] : dense_tensors(l)) {
            const auto a = storage::aligned_superset(file_.file_offset(*info), info->nbytes, kAlign);
            pieces.push_back({a.offset, std::min(a.length, file_.file_size() - a.offset), 0, views});
        }
        for (WeightRef* e : {&l.ffn_gate_exps, &l.ffn_up_exps, &l.ffn_down_exps}) e->data = nullptr;
    }
    uint64_t total = 0;
    for (Piece& p : pieces) {
        p.at = total;
        total += storage::align_up(p.length, kAlign);
    }
    // With a budget the planner has kept this within it; without one, all of it is resident.
    if (total > system_ram_bytes())
        throw OutOfBudget(fmt::format("the model's resident weights need {}, more than this machine's {} of RAM",
                                      format_bytes(total), format_bytes(system_ram_bytes())),
                          "set --dram (e.g. --dram 60%) to stream the layers that do not fit from the model file");
    resident_memory_ = std::make_unique<AnonymousMemory>(total);
    for (const Piece& p : pieces) reader_->submit({resident_memory_->base + p.at, p.offset, p.length});
    reader_->wait_all();
    for (const Piece& p : pieces)
        for (WeightRef* r : p.refs)
            if (*r) r->data = resident_memory_->base + p.at + (file_offset(file_, *r) - p.offset);
    resident_base_.assign(weights_.layers.size(), nullptr);
    size_t piece = first_layer_piece;
    for (size_t il = 0; il < weights_.layers.size(); ++il)
        if (residency_.resident[il] && !residency_.cached_experts(static_cast<int>(il)))
            resident_base_[il] = resident_memory_->base + pieces[piece++].at;
}

uint64_t WeightStore::tile_for_cpu(const std::vector<bool>* only_layers) {
    uint64_t bytes = 0;
    // Each matrix of a view on its own: an expert's, or a fused tensor's rows.
    auto tile = [&](WeightRef& w) {
        if (!w || w.tiled || w.n_rows == 1) return;
        bool tiled = true;
        for (int64_t e = 0; e < w.n_mats && tiled; ++e)
            tiled = cpu::tile_weights(w.type, const_cast<void*>(w.mat(e).data), w.n_rows, w.n_cols);
        if (!tiled) return;  // the first matrix refused: none was rewritten
        w.tiled = true;
        bytes += w.bytes();
    };
    for (size_t il = 0; il < weights_.layers.size(); ++il) {
        if (!residency_.resident[il] || (only_layers && !(*only_layers)[il])) continue;
        LayerWeights& l = weights_.layers[il];
        for (auto m : LayerWeights::kMatrices) tile(l.*m);
    }
    if (only_layers) return bytes;
    tile(weights_.output);
    // Tied embeddings are the same bytes: looked up by row from the tiles (dequantize_weight_row).
    if (weights_.tok_embd.info == weights_.output.info) weights_.tok_embd.tiled = weights_.output.tiled;
    return bytes;
}

WeightStore::HostRange WeightStore::layer_range(int il) const {
    return {residency_.resident[il] ? resident_base_[il] : view_base_, ranges_[il].length};
}

std::unique_ptr<StreamRing> WeightStore::make_stream(storage::PinnedPool& pool, std::vector<int> items, const char* what) {
    auto s = std::make_unique<StreamRing>(
        *reader_, pool, std::move(items),
        [this](int il) { return std::vector<RingRead>{{0, ranges_[il].offset, ranges_[il].length}}; }, what);
    if (trace_) s->set_trace(trace_);
    return s;
}

void WeightStore::check_file_unchanged() const {
    const FileIdentity now = FileIdentity::of(reader_->file().fd(), file_.path());
    if (now == *identity_) return;
    throw IoError(fmt::format("the model file '{}' changed on disk while in use ({} bytes at load, {} now)",
                              file_.path().string(), identity_->size, now.size),
                  "replace a model file by renaming a new one over it (mv), not by rewriting it in place; "
                  "restart to load the new file");
}

WeightStore::~WeightStore() {
    experts_.reset();  // waits for reads into the cache
    stream_.reset();  // waits for reads into the ring
    as_read_.reset();
    if (reader_ && ring_) reader_->unregister_region(ring_->data());
    if (reader_ && staging_) reader_->unregister_region(staging_->data());
}

void WeightStore::set_trace(Trace* trace) {
    trace_ = trace;
    reader_->set_trace(trace);
    if (stream_) stream_->set_trace(trace);
    if (as_read_) as_read_->set_trace(trace);
    if (!trace_) return;
    compute_track_ = trace_->track("compute: layers");
    rebuild_track_ = trace_->track("op offload: layers rebuilt from DRAM");
}

StreamStats WeightStore::stats() const {
    StreamStats s = stats_;
    if (stream_) s.wait_seconds = stream_->wait_seconds();
    if (experts_) {
        s.bytes_read += experts_->stats().bytes_read;
        s.wait_seconds += experts_->stats().wait_seconds;
    }
    return s;
}

const std::byte* WeightStore::read_through(std::unique_ptr<StreamRing>& ring, storage::PinnedPool& pool,
                                           const std::vector<int>& items, const char* what, int il) {
    const std::byte* base = nullptr;
    try {
        base = ring->acquire(il);
        check_file_unchanged();
    } catch (const Error&) {
        // Nothing is held; a new ring reads every layer afresh instead of trusting a slot
        // whose read failed.
        if (base) ring->release();
        ring.reset();
        ring = make_stream(pool, items, what);
        throw;
    }
    stats_.bytes_read += ranges_[il].length;
    ++stats_.layers_read;
    return base;
}

const LayerWeights& WeightStore::acquire(int il) {
    acquired_at_ = std::chrono::steady_clock::now();
    if (residency_.resident[il]) return weights_.layers[il];
    const std::byte* base = read_through(stream_, *ring_, streamed_, "weights", il);
    view_base_ = base;
    // The layer's tensors, rebased from the file into the slot.
    view_ = weights_.layers[il];
    for (WeightRef* r : refs(view_))
        r->data = base + (file_offset(file_, *r) - ranges_[il].offset);
    return view_;
}

void WeightStore::release(int il) {
    if (trace_)
        trace_->slice(compute_track_, fmt::format("layer {}", il), acquired_at_, std::chrono::steady_clock::now(),
                      fmt::format(R"({{"streamed": {}}})", !residency_.resident[il]));
    if (!residency_.resident[il]) stream_->release();
}

void WeightStore::read_layer(int il, std::byte* dst) {
    STRATA_ASSERT(residency_.device(il));
    reader_->read({dst, ranges_[il].offset, ranges_[il].length});
    check_file_unchanged();
}

uint64_t WeightStore::stage_as_read(std::vector<int> layers, int n_slots, storage::MemoryBudget& budget) {
    STRATA_ASSERT(!staging_ && !rebuild_buffers_ && !layers.empty() && n_slots > 0);
    rebuild_next_ = 0;
    // Registered with CUDA like the streaming ring, so the copies to the device are direct.
    [[maybe_unused]] static const bool gpu_pinned = gpu::install_cuda_host_pinner();
    rebuilt_.assign(weights_.layers.size(), false);
    std::vector<int> read;
    size_t rebuilt_bytes = 0;
    for (int il : layers) {
        STRATA_ASSERT(residency_.resident[il]);
        if (resident_base_[il] && file_layout_from_memory(weights_.layers[il])) {
            rebuilt_[il] = true;
            rebuilt_bytes = std::max<size_t>(rebuilt_bytes, ranges_[il].length);
        } else {
            read.push_back(il);
        }
    }
    if (rebuilt_bytes > 0) {
        storage::PinnedPoolOptions po;
        po.slot_bytes = rebuilt_bytes;
        po.n_slots = static_cast<size_t>(n_slots);
        po.what = "buffers op offload rebuilds CPU layers in for the device";
        try {
            rebuild_buffers_ = std::make_unique<storage::PinnedPool>(budget, po);
        } catch (const OutOfBudget&) {
            if (n_slots == 1) throw;
            po.n_slots = 1;  // each rebuild then waits for the copy before it: slower, never wrong
            rebuild_buffers_ = std::make_unique<storage::PinnedPool>(budget, po);
        }
    }
    if (read.empty()) return as_read_bytes();
    storage::PinnedPoolOptions po;
    for (int il : read) po.slot_bytes = std::max<size_t>(po.slot_bytes, ranges_[il].length);
    po.n_slots = std::min(static_cast<size_t>(n_slots), read.size());
    po.what = "buffers for the CPU layers op offload copies to the device";
    try {
        staging_ = std::make_unique<storage::PinnedPool>(budget, po);
    } catch (...) {
        rebuild_buffers_.reset();
        throw;
    }
    reader_->register_region(staging_->data(), staging_->bytes());
    staged_ = std::move(read);
    as_read_ = make_stream(*staging_, staged_, "weights as read");
    return as_read_bytes();
}

WeightStore::HostRange WeightStore::acquire_as_read(int il, const std::function<void(HostRange)>& written) {
    STRATA_ASSERT((as_read_ || rebuild_buffers_) && "op offload's staging was dropped");
    acquired_rebuilt_ = rebuilt_[il];
    if (!acquired_rebuilt_) return {read_through(as_read_, *staging_, staged_, "weights as read", il), ranges_[il].length};
    const TraceScope scope(trace_, rebuild_track_, fmt::format("layer {} as in the file", il));
    std::byte* dst = rebuild_buffers_->slot_data(size_t(rebuild_next_));
    rebuild_next_ = (rebuild_next_ + 1) % int(rebuild_buffers_->n_slots());
    write_file_layout(weights_.layers[il], [&](const WeightRef& w) { return offset_in_layer(il, w); }, dst,
                      [&](uint64_t n) {
                          if (written) written({dst, n});
                      });
    return {dst, ranges_[il].length};
}

void WeightStore::release_as_read() {
    STRATA_ASSERT((as_read_ || rebuild_buffers_) && "op offload's staging was dropped");
    if (!acquired_rebuilt_) as_read_->release();
}

uint64_t WeightStore::as_read_bytes() const {
    return (staging_ ? staging_->bytes() : 0) + (rebuild_buffers_ ? rebuild_buffers_->bytes() : 0);
}

void WeightStore::drop_as_read() {
    rebuild_buffers_.reset();
    rebuilt_.clear();
    if (!staging_) return;
    as_read_.reset();  // waits for its reads
    reader_->unregister_region(staging_->data());
    staging_.reset();
    staged_.clear();
}

void WeightStore::run_on_cpu(int il) {
    if (residency_.cpu(il)) return;
    if (residency_.on_cpu.size() < weights_.layers.size()) residency_.on_cpu.resize(weights_.layers.size(), false);
    if (residency_.device(il)) {
        const uint64_t bytes = storage::align_up(ranges_[il].length, storage::kDefaultDioAlign);
        storage::Reservation held(budget_, bytes, fmt::format("layer {}'s weights, moved off the device", il));
        auto memory = std::make_unique<AnonymousMemory>(bytes);
        reader_->read({memory->base, ranges_[il].offset, ranges_[il].length});
        check_file_unchanged();
        for (WeightRef* r : refs(weights_.layers[il])) r->data = memory->base + (file_offset(file_, *r) - ranges_[il].offset);
        resident_base_[il] = memory->base;
        moved_memory_.push_back(std::move(memory));
        reserved_->moved.push_back(std::move(held));
        residency_.on_device[il] = false;
        residency_.resident[il] = true;
        residency_.resident_bytes += bytes;
        residency_.total_bytes += bytes;
    }
    residency_.on_cpu[il] = true;
}

uint64_t WeightStore::offset_in_layer(int il, const WeightRef& w) const {
    return file_offset(file_, w) - ranges_[il].offset;
}

}  // namespace strata::runtime
