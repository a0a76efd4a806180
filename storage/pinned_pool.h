#pragma once
// Page-locked host memory for I/O and H2D copies: one 2 MiB-aligned mapping with
// transparent huge pages, mlock'ed, optionally registered with the GPU runtime through a
// HostPinner hook (so storage/ never includes CUDA), carved into fixed-size aligned slots
// (the ring of k layer buffers) and accounted against a MemoryBudget.
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "storage/budget.h"

namespace strata::storage {

// Registers host memory with an accelerator runtime (gpu/cuda_host: cudaHostRegister).
class HostPinner {
public:
    virtual ~HostPinner() = default;
    virtual std::string_view name() const = 0;
    // Empty on success, else why it failed; the pool logs it once and stays usable.
    virtual std::string register_memory(void* base, size_t bytes) = 0;
    virtual void unregister_memory(void* base, size_t bytes) noexcept = 0;
};

// The process-wide hook new pools use by default; nullptr removes it. Set once at startup.
void set_host_pinner(std::shared_ptr<HostPinner> pinner);
std::shared_ptr<HostPinner> host_pinner();

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

struct PinnedPoolOptions {
    size_t slot_bytes = 0;
    size_t n_slots = 0;
    size_t slot_align = 4096;  // slot starts are multiples of this (>= O_DIRECT alignment)
    bool lock = true;          // mlock; falls back to pageable memory with one WARN
    bool huge_pages = true;    // MADV_HUGEPAGE
    std::shared_ptr<HostPinner> pinner = host_pinner();  // nullptr: no registration
    std::string what = "pinned buffers";  // named in budget messages
};

class PinnedPool;

// A host range registered with a HostPinner for as long as this lives (a pool's mapping, the KV
// cache's arrays), so that a device copies from it asynchronously at its link's rate. Best
// effort: a refusal leaves the range pageable and says why (move-only).
class PinnedRange {
public:
    PinnedRange(std::shared_ptr<HostPinner> pinner, void* base, size_t bytes);
    PinnedRange(PinnedRange&& o) noexcept;
    PinnedRange& operator=(PinnedRange&&) = delete;
    PinnedRange(const PinnedRange&) = delete;
    ~PinnedRange();
    bool registered() const { return why_not_.empty(); }
    const std::string& why_not() const { return why_not_; }  // the pinner's refusal, empty if registered

private:
    std::shared_ptr<HostPinner> pinner_;
    void* base_;
    size_t bytes_;
    std::string why_not_;
};

// A slot on loan from a PinnedPool; returned when destroyed (move-only).
class PinnedSlot {
public:
    PinnedSlot() = default;
    PinnedSlot(PinnedSlot&& o) noexcept : pool_(o.pool_), index_(o.index_) { o.pool_ = nullptr; }
    PinnedSlot& operator=(PinnedSlot&& o) noexcept;
    PinnedSlot(const PinnedSlot&) = delete;
    PinnedSlot& operator=(const PinnedSlot&) = delete;
    ~PinnedSlot() { reset(); }

    std::byte* data() const;
    size_t size() const;
    size_t index() const { return index_; }
    explicit operator bool() const { return pool_ != nullptr; }
    void reset();

private:
    friend class PinnedPool;
    PinnedSlot(PinnedPool* pool, size_t index) : pool_(pool), index_(index) {}
    PinnedPool* pool_ = nullptr;
    size_t index_ = 0;
};

class PinnedPool {
public:
    // Reserves the whole mapping in `budget` first (OutOfBudget if it does not fit); throws
    // IoError if mmap fails. Locking and registration are best effort.
    PinnedPool(MemoryBudget& budget, const PinnedPoolOptions& options);
    ~PinnedPool();  // every slot must have been returned
    PinnedPool(const PinnedPool&) = delete;
    PinnedPool& operator=(const PinnedPool&) = delete;

    // A free slot, or nullopt when all are on loan (an expected outcome).
    std::optional<PinnedSlot> try_acquire();
    // Blocks until a slot is free.
    PinnedSlot acquire();

    std::byte* slot_data(size_t i) const;  // by index, for rings that manage slots themselves
    size_t slot_bytes() const { return slot_bytes_; }
    size_t slot_stride() const { return stride_; }
    size_t n_slots() const { return n_slots_; }
    size_t n_free() const;

    // The whole mapping, e.g. for Reader::register_region.
    std::byte* data() const { return base_; }
    size_t bytes() const { return bytes_; }
    bool contains(const void* p, size_t n) const;

    bool locked() const { return locked_; }          // mlock succeeded
    bool huge_pages() const { return huge_pages_; }  // MADV_HUGEPAGE accepted
    bool registered() const { return registration_ && registration_->registered(); }  // the HostPinner accepted it

private:
    friend class PinnedSlot;
    void release(size_t index);

    size_t slot_bytes_;
    size_t stride_;
    size_t n_slots_;
    std::byte* base_ = nullptr;
    size_t bytes_ = 0;
    bool locked_ = false;
    bool huge_pages_ = false;
    std::optional<PinnedRange> registration_;  // released before the mapping
    Reservation reservation_;

    mutable std::mutex mu_;
    std::condition_variable free_cv_;
    std::vector<size_t> free_;
};

// One page-locked buffer of `bytes`, charged to `budget` as `what`: a pool of one slot, held
// for the buffer's life (staging for a device's copies).
class PinnedBuffer {
public:
    PinnedBuffer(MemoryBudget& budget, size_t bytes, std::string what);
    std::byte* data() const { return slot_.data(); }
    size_t size() const { return slot_.size(); }

private:
    std::unique_ptr<PinnedPool> pool_;
    PinnedSlot slot_;  // returned before the pool goes
};

}  // namespace strata::storage
