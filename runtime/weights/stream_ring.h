#pragma once
// A ring of pinned buffers that streams a cyclic sequence of items (layers) from a file:
// item i+1..i+k are read while item i is in use, and the cycle wraps so the next pass's
// first items load while this pass's last ones compute. Used for streamed weights and for
// spilled KV cache layers.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace strata::storage {
class PinnedPool;
class Reader;
}  // namespace strata::storage

namespace strata { class Trace; }

namespace strata::runtime {

// One read that fills part of a slot.
struct RingRead {
    size_t slot_offset = 0;
    uint64_t file_offset = 0;
    uint64_t length = 0;
};

class StreamRing {
public:
    // The reads that bring `item` into a slot, asked for when its reads are issued.
    using ReadsFor = std::function<std::vector<RingRead>(int item)>;
    // Whether `item`'s reads may be issued now (its file range is up to date); with `block`, waits
    // until they may. Reads are issued in order: one not ready holds back the ones after it.
    using ReadyFor = std::function<bool(int item, bool block)>;

    // `items` in the order they are used, each once per cycle; at most `items.size()` slots
    // are used so an item's next read is never issued before its last use ends.
    StreamRing(storage::Reader& reader, storage::PinnedPool& pool, std::vector<int> items, ReadsFor reads_for,
               std::string what, ReadyFor ready_for = {});
    ~StreamRing();  // waits for reads in flight: they land in the pool
    StreamRing(const StreamRing&) = delete;
    StreamRing& operator=(const StreamRing&) = delete;

    // Waits until `item` is in its slot and returns the slot. Items are acquired in order,
    // each released before the next; a pass that stopped part-way is resynchronised.
    std::byte* acquire(int item);
    void release();
    // Issues the reads that have become ready since (acquire and release do it too); never blocks.
    void poll();

    double wait_seconds() const { return wait_seconds_; }
    void set_trace(Trace* trace);

private:
    void issue_until(uint64_t limit);

    storage::Reader& reader_;
    storage::PinnedPool& pool_;
    std::vector<int> items_;
    std::vector<int> position_;  // item -> index in items_ (or -1)
    ReadsFor reads_for_;
    ReadyFor ready_for_;
    std::string what_;
    size_t n_slots_;
    std::vector<std::vector<uint64_t>> tickets_;  // per slot
    std::vector<std::chrono::steady_clock::time_point> issued_at_;
    uint64_t cur_ = 0;     // sequence number of the next item to use
    uint64_t issued_ = 0;  // reads issued, in sequence numbers
    bool holding_ = false;
    double wait_seconds_ = 0;
    Trace* trace_ = nullptr;
    int io_track_ = 0, wait_track_ = 0;
};

}  // namespace strata::runtime
