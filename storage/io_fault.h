#pragma once
// Fault injection for the readers, so tests can prove that EIO, short reads and lost
// completions are handled: STRATA_FAULT_IO=eio:N fails the Nth read with EIO, short:N makes the
// Nth read come back short, lost:N drops the Nth read's io_uring completion as if the kernel never
// posted it (counting reads in the order they are issued, from 1). Each fault fires once.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace strata::storage {

enum class FaultKind { None, Eio, Short, Lost };

struct FaultSpec {
    FaultKind kind = FaultKind::None;
    uint64_t nth = 0;  // 1-based

    // "eio:N", "short:N", "lost:N", "" or "none"; throws UsageError on anything else.
    static FaultSpec parse(std::string_view text);
    // From STRATA_FAULT_IO; no fault when unset.
    static FaultSpec from_env();
};

// Rewrites read results as the spec says; thread-safe.
class FaultInjector {
public:
    explicit FaultInjector(FaultSpec spec = {}) : spec_(spec) {}

    // `seq` is the read's 1-based issue number, `result` what the read returned (bytes or
    // -errno) and `granule` the size a short read must stay a multiple of (the O_DIRECT
    // alignment). A short fault fires on the first read at or after N that is longer than
    // one granule, since a shorter one cannot be cut legally.
    long filter(uint64_t seq, long result, size_t granule);
    // Whether the completion of read `seq` is to be dropped (a lost fault).
    bool loses(uint64_t seq);

    const FaultSpec& spec() const { return spec_; }
    bool fired() const { return fired_.load(); }

private:
    FaultSpec spec_;
    std::atomic<bool> fired_{false};
};

}  // namespace strata::storage
