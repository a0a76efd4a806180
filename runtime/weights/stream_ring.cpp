#include "runtime/weights/stream_ring.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "core/trace.h"
#include "cpu/thread_pool.h"
#include "storage/pinned_pool.h"
#include "storage/reader.h"

namespace strata::runtime {

StreamRing::StreamRing(storage::Reader& reader, storage::PinnedPool& pool, std::vector<int> items, ReadsFor reads_for,
                       std::string what, ReadyFor ready_for)
    : reader_(reader),
      pool_(pool),
      items_(std::move(items)),
      reads_for_(std::move(reads_for)),
      ready_for_(std::move(ready_for)),
      what_(std::move(what)),
      n_slots_(std::min(pool.n_slots(), items_.size())),
      tickets_(n_slots_),
      issued_at_(n_slots_) {
    STRATA_ASSERT(n_slots_ > 0);
    for (size_t i = 0; i < items_.size(); ++i) {
        const auto item = static_cast<size_t>(items_[i]);
        if (item >= position_.size()) position_.resize(item + 1, -1);
        position_[item] = static_cast<int>(i);
    }
}

StreamRing::~StreamRing() {
    try {
        reader_.wait_all();
    } catch (const Error&) {
        // Reads into buffers about to be freed: their failure no longer matters.
    }
}

void StreamRing::set_trace(Trace* trace) {
    trace_ = trace;
    if (!trace_) return;
    io_track_ = trace_->track("io: " + what_ + " reads");
    wait_track_ = trace_->track("compute: waiting for " + what_);
}

void StreamRing::issue_until(uint64_t limit) {
    for (; issued_ < limit; ++issued_) {
        const int item = items_[issued_ % items_.size()];
        if (ready_for_ && !ready_for_(item, false)) return;
        const size_t slot = issued_ % n_slots_;
        std::byte* base = pool_.slot_data(slot);
        tickets_[slot].clear();
        for (const RingRead& r : reads_for_(item))
            if (r.length) tickets_[slot].push_back(reader_.submit({base + r.slot_offset, r.file_offset, r.length}));
        issued_at_[slot] = std::chrono::steady_clock::now();
    }
}

std::byte* StreamRing::acquire(int item) {
    STRATA_ASSERT(!holding_);
    STRATA_ASSERT(item >= 0 && static_cast<size_t>(item) < position_.size() && position_[item] >= 0);
    const auto index = static_cast<uint64_t>(position_[item]);
    if (index != cur_ % items_.size()) {
        // A pass stopped part-way (an error mid-forward): drop what is in flight, restart here.
        reader_.wait_all();
        cur_ = issued_ = (issued_ / items_.size() + 1) * items_.size() + index;
    }
    issue_until(cur_ + n_slots_);
    const auto t0 = std::chrono::steady_clock::now();
    const size_t slot = cur_ % n_slots_;
    const bool blocks = issued_ <= cur_ || !std::all_of(tickets_[slot].begin(), tickets_[slot].end(),
                                                         [&](uint64_t t) { return reader_.poll(t); });
    if (blocks) cpu::park_idle_workers();
    if (issued_ <= cur_) {  // not ready until now: wait for it, then read it
        ready_for_(item, true);
        issue_until(cur_ + n_slots_);
    }
    for (uint64_t t : tickets_[slot]) reader_.wait(t);
    const auto t1 = std::chrono::steady_clock::now();
    wait_seconds_ += std::chrono::duration<double>(t1 - t0).count();
    if (trace_) {
        // The read ended at the latest when the wait returned: the slice is an upper bound.
        trace_->slice(io_track_, fmt::format("{} {}", what_, item), issued_at_[slot], t1);
        trace_->slice(wait_track_, fmt::format("wait {} {}", what_, item), t0, t1);
    }
    holding_ = true;
    return pool_.slot_data(slot);
}

void StreamRing::release() {
    STRATA_ASSERT(holding_);
    holding_ = false;
    ++cur_;
    issue_until(cur_ + n_slots_);  // the slot just freed takes the read n_slots ahead
}

void StreamRing::poll() { issue_until(cur_ + n_slots_); }

}  // namespace strata::runtime
