#pragma once
// How busy the rest of the machine was while the probe measured: the CPU time other programs
// (and, in a VM, the hypervisor's steal) took, from /proc/stat's busy time less this process's
// own. A probe measured beside a compiler measures the share of the machine the compiler left,
// and every plan priced from it is off by as much.
#include <chrono>
#include <optional>
#include <string>

namespace strata::probe {

// /proc/stat's "cpu" line, in clock ticks: busy (user, nice, system, irq, softirq, steal) and
// that plus idle and iowait; nullopt where the line does not parse.
struct CpuTicks {
    double busy = 0, total = 0;
};
std::optional<CpuTicks> parse_cpu_ticks(const std::string& line);

class OtherLoad {
public:
    OtherLoad();  // counts from now
    // Cores' worth of CPU time other programs took since then, on average (0 where /proc/stat
    // cannot be read).
    double cores() const;

private:
    std::optional<CpuTicks> start_;
    double own_start_s_ = 0;
    std::chrono::steady_clock::time_point t0_;
};

// A note for the profile where others took more than a little of the machine, else empty.
std::string busy_machine_note(double other_cores, int n_cpus);

}  // namespace strata::probe
