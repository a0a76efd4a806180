#include "runtime/weight_store.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "gpu/cuda_host.h"
#include "models/gguf_file.h"
#include "runtime/core/error.h"
#include "runtime/core/log.h"
#include "runtime/stream_ring.h"
#include "runtime/trace.h"
#include "storage/budget.h"
#include "storage/file_io.h"
#include "storage/pinned_pool.h"
#include "storage/reader.h"

namespace strata {

namespace {

std::vector<WeightRef*> refs(LayerWeights& l) {
    return {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.bq, &l.bk, &l.bv,
            &l.ffn_norm, &l.ffn_gate, &l.ffn_up, &l.ffn_down};
}

uint64_t fixed_bytes(const ModelWeights& w) {
    uint64_t b = w.tok_embd.info->nbytes + w.output_norm.info->nbytes;
    if (w.output.info != w.tok_embd.info) b += w.output.info->nbytes;
    if (w.rope_freqs) b += w.rope_freqs.info->nbytes;
    return b;
}

// Asks the kernel to read resident ranges ahead, so the first pass does not fault page by page.
void will_need(const GgufFile& f, const WeightRef& r) {
    if (!r) return;
    const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    auto begin = reinterpret_cast<uintptr_t>(r.data) / page * page;
    ::madvise(reinterpret_cast<void*>(begin), reinterpret_cast<uintptr_t>(r.data) + r.info->nbytes - begin, MADV_WILLNEED);
}

}  // namespace

// The reader's one staging buffer (ReaderOptions::chunk_bytes) for the file's unaligned tail.
constexpr uint64_t kStagingBytes = uint64_t{1} << 20;

struct WeightStore::Reserved {
    storage::Reservation resident;
};

WeightStore::WeightStore(const GgufFile& file, const Hparams& hp, storage::MemoryBudget& budget, uint64_t other_bytes,
                         int prefetch_depth, const DecideResidency& decide)
    : file_(file), mapped_(ModelWeights::bind(file, hp)), reserved_(std::make_unique<Reserved>()) {
    constexpr uint64_t kAlign = storage::kDefaultDioAlign;
    ResidencyInput in;
    in.budget = budget.limit() == UINT64_MAX ? 0 : budget.limit();  // UINT64_MAX: no --dram given
    in.fixed_bytes = fixed_bytes(mapped_);
    in.other_bytes = other_bytes + kStagingBytes;
    in.prefetch_depth = prefetch_depth;
    for (auto& layer : mapped_.layers) {
        uint64_t lo = UINT64_MAX, hi = 0;
        for (WeightRef* r : refs(layer))
            if (*r) {
                lo = std::min(lo, file.file_offset(*r->info));
                hi = std::max(hi, file.file_offset(*r->info) + r->info->nbytes);
            }
        const auto a = storage::aligned_superset(lo, hi - lo, kAlign);
        // The last layer's aligned end may pass the end of the file: stop at the end.
        ranges_.push_back({a.offset, std::min(a.length, file.file_size() - a.offset)});
        in.layer_bytes.push_back(a.length);
    }
    residency_ = decide(in);
    reserved_->resident = storage::Reservation(budget, residency_.resident_bytes, "resident model weights");

    for (size_t il = 0; il < mapped_.layers.size(); ++il)
        if (!residency_.resident[il]) streamed_.push_back(static_cast<int>(il));
    for (const WeightRef* r : {&mapped_.tok_embd, &mapped_.output, &mapped_.output_norm}) will_need(file, *r);
    for (size_t il = 0; il < mapped_.layers.size(); ++il)
        if (residency_.resident[il])
            for (WeightRef* r : refs(mapped_.layers[il])) will_need(file, *r);

    if (streamed_.empty()) return;
    // With a GPU, the ring is also registered with CUDA so layers can go on to the device.
    static const bool gpu_pinned = gpu::install_cuda_host_pinner();
    STRATA_LOG_DEBUG("weights: streaming buffers {} registered with CUDA", gpu_pinned ? "are" : "are not");
    storage::PinnedPoolOptions po;
    po.slot_bytes = residency_.slot_bytes;
    po.n_slots = static_cast<size_t>(residency_.n_slots);
    po.what = "weight streaming buffers";
    ring_ = std::make_unique<storage::PinnedPool>(budget, po);
    auto f = storage::File::open_read(file.path(), storage::OpenMode::DirectOrBuffered);
    storage::ReaderOptions ro;
    ro.staging_slots = 1;  // only the file's unaligned tail goes through staging
    ro.staging_budget = &budget;
    reader_ = storage::open_reader(f, ro);
    reader_->register_region(ring_->data(), ring_->bytes());
    stream_ = std::make_unique<StreamRing>(
        *reader_, *ring_, streamed_,
        [this](int il) { return std::vector<RingRead>{{0, ranges_[il].offset, ranges_[il].length}}; }, "weights");
    STRATA_LOG_INFO("weights: {} of {} layers resident ({}), {} streamed from {} through {} x {} buffers ({} reader)",
                    mapped_.layers.size() - streamed_.size(), mapped_.layers.size(),
                    storage::format_bytes(residency_.resident_bytes), streamed_.size(), file.path().string(),
                    ring_->n_slots(), storage::format_bytes(residency_.slot_bytes), reader_->backend());
}

WeightStore::~WeightStore() {
    stream_.reset();  // waits for reads into the ring
    if (reader_ && ring_) reader_->unregister_region(ring_->data());
}

void WeightStore::set_trace(Trace* trace) {
    trace_ = trace;
    if (stream_) stream_->set_trace(trace);
    if (trace_) compute_track_ = trace_->track("compute: layers");
}

StreamStats WeightStore::stats() const {
    StreamStats s = stats_;
    if (stream_) s.wait_seconds = stream_->wait_seconds();
    return s;
}

const LayerWeights& WeightStore::acquire(int il) {
    acquired_at_ = std::chrono::steady_clock::now();
    if (residency_.resident[il]) return mapped_.layers[il];
    const std::byte* base = stream_->acquire(il);
    stats_.bytes_read += ranges_[il].length;
    ++stats_.layers_read;
    // The layer's tensors, rebased from the file into the slot.
    view_ = mapped_.layers[il];
    for (WeightRef* r : refs(view_))
        if (*r) r->data = base + (file_.file_offset(*r->info) - ranges_[il].offset);
    return view_;
}

void WeightStore::release(int il) {
    if (trace_)
        trace_->slice(compute_track_, fmt::format("layer {}", il), acquired_at_, std::chrono::steady_clock::now(),
                      fmt::format(R"({{"streamed": {}}})", !residency_.resident[il]));
    if (!residency_.resident[il]) stream_->release();
}

}  // namespace strata
