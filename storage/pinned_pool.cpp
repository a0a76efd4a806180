#include "storage/pinned_pool.h"

#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "storage/file_io.h"

namespace strata::storage {

namespace {

std::mutex g_pinner_mu;
std::shared_ptr<HostPinner> g_pinner;

// Degraded paths warn once per process and reason; repeats go to debug.
void warn_once(std::atomic<bool>& flag, const std::string& msg) {
    if (!flag.exchange(true)) STRATA_LOG_WARN("{}", msg);
    else STRATA_LOG_DEBUG("{}", msg);
}

std::atomic<bool> g_warned_mlock{false};
std::atomic<bool> g_warned_pinner{false};

}  // namespace

void set_host_pinner(std::shared_ptr<HostPinner> pinner) {
    std::lock_guard lk(g_pinner_mu);
    g_pinner = std::move(pinner);
}

std::shared_ptr<HostPinner> host_pinner() {
    std::lock_guard lk(g_pinner_mu);
    return g_pinner;
}

PinnedSlot& PinnedSlot::operator=(PinnedSlot&& o) noexcept {
    if (this != &o) {
        reset();
        pool_ = o.pool_;
        index_ = o.index_;
        o.pool_ = nullptr;
    }
    return *this;
}

std::byte* PinnedSlot::data() const { return pool_ ? pool_->slot_data(index_) : nullptr; }
size_t PinnedSlot::size() const { return pool_ ? pool_->slot_bytes() : 0; }

void PinnedSlot::reset() {
    if (pool_) pool_->release(index_);
    pool_ = nullptr;
}

PinnedPool::PinnedPool(MemoryBudget& budget, const PinnedPoolOptions& o)
    : slot_bytes_(o.slot_bytes), n_slots_(o.n_slots) {
    if (o.slot_bytes == 0 || o.n_slots == 0)
        throw UsageError(fmt::format("{}: {} slots of {} bytes is empty", o.what, o.n_slots, o.slot_bytes));
    if (o.slot_align == 0 || (o.slot_align & (o.slot_align - 1)) != 0 || o.slot_align > kHugePageBytes)
        throw UsageError(fmt::format("{}: slot alignment {} is not a power of two up to 2 MiB", o.what, o.slot_align));
    stride_ = static_cast<size_t>(align_up(o.slot_bytes, o.slot_align));
    // Whole huge pages, so THP can back all of it.
    bytes_ = static_cast<size_t>(align_up(stride_ * n_slots_, kHugePageBytes));
    reservation_ = Reservation(budget, bytes_, o.what);

    // mmap only promises page alignment: over-map by 2 MiB and trim both ends.
    const size_t span = bytes_ + kHugePageBytes;
    void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        throw IoError(fmt::format("mmap of {} for {} failed: {}", format_bytes(span), o.what, std::strerror(errno)));
    auto* p = static_cast<std::byte*>(raw);
    base_ = reinterpret_cast<std::byte*>(align_up(reinterpret_cast<uintptr_t>(p), kHugePageBytes));
    if (base_ > p) munmap(p, static_cast<size_t>(base_ - p));
    const size_t tail = static_cast<size_t>((p + span) - (base_ + bytes_));
    if (tail) munmap(base_ + bytes_, tail);

    if (o.huge_pages) huge_pages_ = madvise(base_, bytes_, MADV_HUGEPAGE) == 0;
    if (o.lock) {
        // mlock also faults every page in, so first use does not stall on page faults.
        locked_ = mlock(base_, bytes_) == 0;
        if (!locked_)
            warn_once(g_warned_mlock,
                      fmt::format("storage: mlock of {} for {} failed ({}); using pageable memory, which the "
                                  "kernel may swap and GPU copies must stage (raise `ulimit -l` or grant "
                                  "CAP_IPC_LOCK)",
                                  format_bytes(bytes_), o.what, std::strerror(errno)));
    }
#ifdef MADV_POPULATE_WRITE
    if (!locked_) (void)madvise(base_, bytes_, MADV_POPULATE_WRITE);  // pre-fault, best effort
#endif
    if (o.pinner) {
        registration_.emplace(o.pinner, base_, bytes_);
        const std::string& why = registration_->why_not();
        if (!registered())
            warn_once(g_warned_pinner, fmt::format("storage: {} of {} for {} failed ({}); copies to the device "
                                                   "will be staged by the driver and slower",
                                                   o.pinner->name(), format_bytes(bytes_), o.what, why));
    }
    free_.reserve(n_slots_);
    for (size_t i = n_slots_; i-- > 0;) free_.push_back(i);
    STRATA_LOG_INFO("storage: {}: {} slots of {} ({} in all; {}, {}{})", o.what, n_slots_, format_bytes(slot_bytes_),
                    format_bytes(bytes_), locked_ ? "locked" : "pageable",
                    huge_pages_ ? "huge pages" : "small pages",
                    registered() ? fmt::format(", registered by {}", o.pinner->name()) : std::string());
}

PinnedPool::~PinnedPool() {
    {
        std::lock_guard lk(mu_);
        STRATA_ASSERT(free_.size() == n_slots_);  // a PinnedSlot outlives its pool
    }
    registration_.reset();
    munmap(base_, bytes_);  // also unlocks
}

PinnedRange::PinnedRange(std::shared_ptr<HostPinner> pinner, void* base, size_t bytes)
    : pinner_(std::move(pinner)), base_(base), bytes_(bytes), why_not_(pinner_->register_memory(base, bytes)) {}

PinnedRange::PinnedRange(PinnedRange&& o) noexcept
    : pinner_(std::move(o.pinner_)), base_(o.base_), bytes_(o.bytes_), why_not_(std::move(o.why_not_)) {
    o.pinner_ = nullptr;
}

PinnedRange::~PinnedRange() {
    if (pinner_ && registered()) pinner_->unregister_memory(base_, bytes_);
}

std::optional<PinnedSlot> PinnedPool::try_acquire() {
    std::lock_guard lk(mu_);
    if (free_.empty()) return std::nullopt;
    const size_t i = free_.back();
    free_.pop_back();
    return PinnedSlot(this, i);
}

PinnedSlot PinnedPool::acquire() {
    std::unique_lock lk(mu_);
    free_cv_.wait(lk, [&] { return !free_.empty(); });
    const size_t i = free_.back();
    free_.pop_back();
    return PinnedSlot(this, i);
}

void PinnedPool::release(size_t i) {
    {
        std::lock_guard lk(mu_);
        STRATA_ASSERT(i < n_slots_ && free_.size() < n_slots_);
        free_.push_back(i);
    }
    free_cv_.notify_one();
}

std::byte* PinnedPool::slot_data(size_t i) const {
    STRATA_ASSERT(i < n_slots_);
    return base_ + i * stride_;
}

size_t PinnedPool::n_free() const {
    std::lock_guard lk(mu_);
    return free_.size();
}

bool PinnedPool::contains(const void* p, size_t n) const {
    const auto b = reinterpret_cast<uintptr_t>(p), lo = reinterpret_cast<uintptr_t>(base_);
    return b >= lo && n <= bytes_ && b - lo <= bytes_ - n;
}

PinnedBuffer::PinnedBuffer(MemoryBudget& budget, size_t bytes, std::string what) {
    PinnedPoolOptions po;
    po.slot_bytes = bytes;
    po.n_slots = 1;
    po.what = std::move(what);
    pool_ = std::make_unique<PinnedPool>(budget, po);
    slot_ = std::move(*pool_->try_acquire());
}

}  // namespace strata::storage
