#include "probe/machine_load.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace strata::probe {

namespace {

std::optional<CpuTicks> read_cpu_ticks() {
    std::ifstream in("/proc/stat");
    std::string line;
    if (!in || !std::getline(in, line)) return std::nullopt;
    return parse_cpu_ticks(line);
}

double own_cpu_seconds() {
    rusage u{};
    if (::getrusage(RUSAGE_SELF, &u) != 0) return 0;
    auto s = [](const timeval& t) { return double(t.tv_sec) + 1e-6 * double(t.tv_usec); };
    return s(u.ru_utime) + s(u.ru_stime);
}

}  // namespace

std::optional<CpuTicks> parse_cpu_ticks(const std::string& line) {
    std::istringstream in(line);
    std::string name;
    // user nice system idle iowait irq softirq steal (guest time is inside user's)
    double v[8] = {};
    if (!(in >> name) || name != "cpu") return std::nullopt;
    for (double& x : v)
        if (!(in >> x)) return std::nullopt;
    const double busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    return CpuTicks{busy, busy + v[3] + v[4]};
}

OtherLoad::OtherLoad() : start_(read_cpu_ticks()), own_start_s_(own_cpu_seconds()), t0_(std::chrono::steady_clock::now()) {}

double OtherLoad::cores() const {
    const std::optional<CpuTicks> now = read_cpu_ticks();
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    const long hz = ::sysconf(_SC_CLK_TCK);
    if (!start_ || !now || elapsed <= 0 || hz <= 0) return 0;
    const double busy_s = (now->busy - start_->busy) / double(hz);
    return std::max(0.0, (busy_s - (own_cpu_seconds() - own_start_s_)) / elapsed);
}

std::string busy_machine_note(double other_cores, int n_cpus) {
    // A tenth of the machine, and at least a quarter of a core: what an idle system's daemons
    // take stays well below.
    if (other_cores < std::max(0.25, 0.1 * n_cpus)) return "";
    return fmt::format("load: other programs (or the hypervisor) took {:.1f} of the {} CPUs while this probe measured, so "
                       "its rates are the share they left; measure again (`strata probe`) when the machine is quiet",
                       other_cores, n_cpus);
}

}  // namespace strata::probe
