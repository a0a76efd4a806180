#include "storage/chunked_reader.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <unistd.h>

#include "core/bytes.h"
#include "core/error.h"
#include "core/trace.h"

namespace strata::storage {

namespace {

size_t effective_chunk_bytes(const File& f, size_t wanted) {
    // A multiple of every alignment involved, so chunk boundaries stay aligned; at most
    // 1 GiB, as an io_uring read length is 32-bit and a registered buffer at most 1 GiB.
    const size_t a = std::max({f.alignment().offset, f.alignment().memory, kDefaultDioAlign});
    return static_cast<size_t>(align_up(std::clamp(wanted, a, size_t{1} << 30), a));
}

}  // namespace

ChunkedReader::ChunkedReader(const File& file, const ReaderOptions& options, unsigned max_inflight)
    : file_(file.duplicate()),
      chunk_bytes_(effective_chunk_bytes(file, options.chunk_bytes)),
      geo_{file.size(), file.direct(), file.alignment().offset, file.alignment().memory},
      stall_after_(options.stall_after),
      max_inflight_(std::max(1u, max_inflight)),
      n_staging_(std::max(1u, options.staging_slots)),
      staging_budget_(options.staging_budget),
      fault_(options.fault ? *options.fault : FaultSpec::from_env()),
      what_(options.what) {}

Ticket ChunkedReader::submit(const ReadRequest& r) {
    if (r.length > 0 && r.dst == nullptr) throw UsageError("read request with a null destination");
    if (r.file_offset > geo_.size || r.length > geo_.size - r.file_offset)
        throw IoError(fmt::format("read past the end of '{}': bytes [{}, {}) requested, the file has {} bytes",
                                  file_.path().string(), r.file_offset, r.file_offset + r.length, geo_.size),
                      "the file is shorter than its header says: it may be truncated or still downloading");
    std::vector<PlannedRead> plan = plan_reads(r.dst, r.file_offset, r.length, geo_, chunk_bytes_);

    std::lock_guard lk(mu_);
    if (std::any_of(plan.begin(), plan.end(), [](const PlannedRead& p) { return p.bounce; }))
        ensure_staging_locked();  // may throw OutOfBudget, before anything is queued
    const Ticket t = next_ticket_++;
    TicketState& st = tickets_[t];
    st.request = r;
    st.chunks_left = plan.size();
    if (trace_) st.submitted = std::chrono::steady_clock::now();
    if (plan.empty()) {
        ++stats_.n_requests;
        return t;
    }
    auto* dst = static_cast<std::byte*>(r.dst);
    for (const PlannedRead& p : plan) {
        auto c = std::make_unique<Chunk>();
        c->ticket = t;
        c->file_offset = p.file_offset;
        c->length = p.length;
        c->need = p.need;
        c->bounce = p.bounce;
        c->skip = p.skip;
        c->copy_len = p.copy_len;
        c->copy_to = dst + p.dst_offset;
        c->buf = p.bounce ? nullptr : dst + p.dst_offset;  // staging is assigned when issued
        pending_.push_back(std::move(c));
    }
    dispatch_locked();
    return t;
}

void ChunkedReader::ensure_staging_locked() {
    if (staging_) return;
    const size_t bytes = n_staging_ * chunk_bytes_;
    if (staging_budget_) staging_reservation_ = Reservation(*staging_budget_, bytes, "I/O staging buffers");
    staging_ = allocate_aligned(bytes, std::max(geo_.memory_align, kDefaultDioAlign));
    for (int i = static_cast<int>(n_staging_) - 1; i >= 0; --i) free_staging_.push_back(i);
    staging_allocated_locked(staging_.get(), bytes);
}

void ChunkedReader::note_inflight_locked(int delta) {
    // Busy time: wall time with at least one read in flight, for the bandwidth figure.
    const auto now = std::chrono::steady_clock::now();
    if (delta > 0 && inflight_ == 0) busy_since_ = now;
    inflight_ = static_cast<unsigned>(static_cast<int>(inflight_) + delta);
    if (delta < 0 && inflight_ == 0) {
        stats_.busy_seconds += std::chrono::duration<double>(now - busy_since_).count();
        done_cv_.notify_all();  // drain() waits for this
    }
}

ChunkedReader::ChunkPtr ChunkedReader::next_chunk_locked() {
    if (closing_ || pending_.empty() || inflight_ >= max_inflight_) return nullptr;
    Chunk& c = *pending_.front();
    if (c.bounce && c.staging < 0) {
        // FIFO: an unaligned chunk waits for staging rather than being overtaken.
        if (free_staging_.empty()) return nullptr;
        c.staging = free_staging_.back();
        free_staging_.pop_back();
        c.buf = staging_.get() + static_cast<size_t>(c.staging) * chunk_bytes_;
        c.copy_from = c.buf + c.skip;
    }
    ChunkPtr out = std::move(pending_.front());
    pending_.pop_front();
    note_inflight_locked(+1);
    issued_[out.get()] = std::chrono::steady_clock::now();
    out->seq = ++n_issued_;
    ++stats_.n_reads;
    if (out->bounce) ++stats_.n_bounced;
    return out;
}

void ChunkedReader::complete(ChunkPtr c, long result) {
    // A cut read must leave the rest aligned in both file offset and buffer address.
    const size_t granule = geo_.direct ? std::max(geo_.offset_align, geo_.memory_align) : 1;
    const long r = fault_.filter(c->seq, result, granule);
    std::string error, hint;
    bool again = false;
    if (r < 0 && (r == -EINTR || r == -EAGAIN)) {
        again = true;
    } else if (r < 0) {
        error = fmt::format("read of '{}' failed at offset {} (length {}): {} (errno {})", file_.path().string(),
                            c->file_offset, c->length, std::strerror(static_cast<int>(-r)), -r);
        hint = "the disk or the file may be damaged; the kernel log (dmesg) may say more";
    } else if (static_cast<size_t>(r) >= c->need) {
        // Done. Staged bytes are copied here, outside the lock: the chunk owns its slot
        // and its part of the caller's buffer.
        if (c->bounce) std::memcpy(c->copy_to, c->copy_from, c->copy_len);
    } else if (r == 0) {
        error = fmt::format("unexpected end of '{}' at offset {} ({} more bytes expected)", file_.path().string(),
                            c->file_offset, c->need);
        hint = "the file was truncated or replaced while in use";
    } else {
        again = true;  // short read: reissue the rest
    }
    std::lock_guard lk(mu_);
    issued_.erase(c.get());
    note_inflight_locked(-1);
    if (r > 0) stats_.bytes_read += static_cast<uint64_t>(r);
    if (again && r > 0) {
        ++stats_.n_short_reads;
        c->file_offset += static_cast<uint64_t>(r);
        c->buf += r;
        c->length -= static_cast<size_t>(r);
        c->need -= static_cast<size_t>(r);
    }
    const bool ticket_failed = !tickets_.at(c->ticket).error.empty();
    if (again && !closing_ && !ticket_failed) {
        pending_.push_front(std::move(c));  // keeps its staging slot and partial data
    } else {
        finish_locked(*c, error, hint);
    }
    dispatch_locked();
}

void ChunkedReader::set_trace(Trace* trace) {
    const int track = trace ? trace->track(fmt::format("disk: {} {}", backend(), what_)) : 0;
    std::lock_guard lk(mu_);
    trace_ = trace;
    trace_track_ = track;
}

void ChunkedReader::finish_locked(Chunk& c, const std::string& error, const std::string& hint) {
    if (c.staging >= 0) free_staging_.push_back(c.staging);
    c.staging = -1;
    TicketState& st = tickets_.at(c.ticket);
    if (!error.empty() && st.error.empty()) {
        st.error = fmt::format("{} while reading bytes [{}, {})", error, st.request.file_offset,
                               st.request.file_offset + st.request.length);
        st.hint = hint;
        cancel_pending_locked(c.ticket);  // its other chunks are pointless now
    }
    if (--st.chunks_left == 0) {
        if (st.error.empty()) {
            ++stats_.n_requests;
            stats_.bytes_requested += st.request.length;
        }
        if (trace_)
            trace_->slice(trace_track_, format_bytes(st.request.length), st.submitted, std::chrono::steady_clock::now(),
                          fmt::format(R"({{"offset": {}, "failed": {}}})", st.request.file_offset, !st.error.empty()));
        done_cv_.notify_all();
    }
}

void ChunkedReader::cancel_pending_locked(Ticket t) {
    for (auto it = pending_.begin(); it != pending_.end();) {
        if ((*it)->ticket != t) {
            ++it;
            continue;
        }
        if ((*it)->staging >= 0) free_staging_.push_back((*it)->staging);
        --tickets_.at(t).chunks_left;
        it = pending_.erase(it);
    }
}

bool ChunkedReader::poll(Ticket t) {
    std::lock_guard lk(mu_);
    const auto it = tickets_.find(t);
    if (it == tickets_.end()) {
        if (t == 0 || t >= next_ticket_) throw UsageError(fmt::format("unknown read ticket {}", t));
        return true;  // already waited for
    }
    return it->second.chunks_left == 0;
}

void ChunkedReader::throw_failure(TicketState& st) {
    std::string error = std::move(st.error), hint = std::move(st.hint);
    throw IoError(error, hint);
}

void ChunkedReader::wait(Ticket t) {
    std::unique_lock lk(mu_);
    if (tickets_.find(t) == tickets_.end()) {
        if (t == 0 || t >= next_ticket_) throw UsageError(fmt::format("unknown read ticket {}", t));
        return;
    }
    // std::map nodes are stable, so the reference survives other tickets coming and going.
    TicketState& st = tickets_.at(t);
    done_cv_.wait(lk, [&] { return st.chunks_left == 0; });
    TicketState done = std::move(st);
    tickets_.erase(t);
    if (!done.error.empty()) throw_failure(done);
}

void ChunkedReader::wait_all() {
    std::unique_lock lk(mu_);
    done_cv_.wait(lk, [&] {
        return std::all_of(tickets_.begin(), tickets_.end(), [](const auto& kv) { return kv.second.chunks_left == 0; });
    });
    std::map<Ticket, TicketState> done;
    done.swap(tickets_);
    for (auto& [t, st] : done)
        if (!st.error.empty()) throw_failure(st);
}

ReaderStats ChunkedReader::stats() const {
    std::lock_guard lk(mu_);
    ReaderStats s = stats_;
    if (inflight_ > 0) s.busy_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - busy_since_).count();
    return s;
}

void ChunkedReader::drain() {
    std::unique_lock lk(mu_);
    closing_ = true;
    for (auto& c : pending_)
        if (c->staging >= 0) free_staging_.push_back(c->staging);
    pending_.clear();
    done_cv_.wait(lk, [&] { return inflight_ == 0; });
}

long ChunkedReader::pread_chunk(const Chunk& c, std::byte* buf) const {
    size_t done = 0;
    while (done < c.need) {
        const ssize_t n = ::pread(file_.fd(), buf + done, c.length - done, static_cast<off_t>(c.file_offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -errno;
        if (n == 0) return 0;  // the file ends before the bytes it must hold: complete() says so
        done += static_cast<size_t>(n);
    }
    return static_cast<long>(done);
}

size_t ChunkedReader::redo_stalled() {
    std::vector<ChunkPtr> redo;
    {
        std::lock_guard lk(mu_);
        const auto now = std::chrono::steady_clock::now();
        for (auto it = issued_.begin(); it != issued_.end();) {
            if (now - it->second < stall_after_) {
                ++it;
                continue;
            }
            Chunk* first = const_cast<Chunk*>(it->first);
            auto again = std::make_unique<Chunk>(*first);
            if (again->bounce) {
                // Read whole again: what a short read left in the old slot stays there.
                const size_t done = static_cast<size_t>(first->buf - (staging_.get() + static_cast<size_t>(first->staging) * chunk_bytes_));
                again->file_offset -= done;
                again->length += done;
                again->need += done;
            }
            // The first attempt keeps its staging slot (the kernel may still write into it)
            // and is cancelled where the backend can.
            again->staging = -1;
            again->seq = 0;  // (no fault fires on a read made again)
            redo.push_back(std::move(again));
            abandoned_.emplace_back(first);
            abandon_locked(first);
            ++stats_.n_stalled;
            it = issued_.erase(it);
        }
        // Slots held by abandoned reads leave staged chunks waiting for none: those are read here too.
        const bool slots_lost = std::any_of(abandoned_.begin(), abandoned_.end(), [](const ChunkPtr& c) { return c->staging >= 0; });
        while (slots_lost && free_staging_.empty() && !closing_ && !pending_.empty() && pending_.front()->bounce &&
               pending_.front()->staging < 0) {
            ChunkPtr c = std::move(pending_.front());
            pending_.pop_front();
            note_inflight_locked(+1);
            ++stats_.n_reads;
            ++stats_.n_bounced;
            redo.push_back(std::move(c));
        }
    }
    for (ChunkPtr& c : redo) {
        // A staged chunk is read into a buffer of its own, aligned as the file needs.
        AlignedBuffer own;
        long result = 0;
        try {
            if (c->bounce) {
                own = allocate_aligned(c->length, std::max(geo_.memory_align, kDefaultDioAlign));
                c->buf = own.get();
                c->copy_from = c->buf + c->skip;
            }
            result = pread_chunk(*c, c->buf);
        } catch (const std::bad_alloc&) {
            result = -ENOMEM;
        }
        complete(std::move(c), result);
    }
    return redo.size();
}

size_t ChunkedReader::n_abandoned() const {
    std::lock_guard lk(mu_);
    return abandoned_.size();
}

bool ChunkedReader::abandoned(Chunk* chunk) {
    std::lock_guard lk(mu_);
    const auto it = std::find_if(abandoned_.begin(), abandoned_.end(), [&](const ChunkPtr& c) { return c.get() == chunk; });
    if (it == abandoned_.end()) return false;
    if ((*it)->staging >= 0) free_staging_.push_back((*it)->staging);  // given back: its slot is free again
    abandoned_.erase(it);
    dispatch_locked();
    return true;
}

}  // namespace strata::storage
