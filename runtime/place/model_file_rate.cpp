#include "runtime/place/model_file_rate.h"

#include <algorithm>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include "core/log.h"
#include "probe/io_rates.h"
#include "probe/typical.h"
#include "runtime/place/placement.h"
#include "storage/file_io.h"

namespace strata::runtime {

namespace {
constexpr uint64_t kSampleBytes = uint64_t{32} << 20;
constexpr uint64_t kMinSampleBytes = uint64_t{8} << 20;  // fewer: a read's start-up weighs in the rate
constexpr int kPasses = 3;

// A file's rate at a depth, timed once a process: a server that loads a model again, or a
// plan priced twice, prices it alike (a file rewritten in place is timed again).
struct Timed {
    std::string path;
    uint64_t size;
    std::filesystem::file_time_type written;
    unsigned chunks;
    bool operator==(const Timed&) const = default;
};

double file_gbps(const std::filesystem::path& file, uint64_t bytes, unsigned chunks) {
    static std::mutex mu;
    static std::vector<std::pair<Timed, double>> timed;
    const Timed key{file.string(), std::filesystem::file_size(file), std::filesystem::last_write_time(file), chunks};
    std::lock_guard lock(mu);
    for (const auto& [k, gbps] : timed)
        if (k == key) return gbps;
    std::vector<double> rates;
    for (int pass = 0; pass < kPasses; ++pass) rates.push_back(probe::measure_sequential_read_gbps(file, bytes, chunks));
    const double gbps = probe::median(std::move(rates));
    timed.emplace_back(key, gbps);
    return gbps;
}
}  // namespace

bool may_stream(const ResidencyInput& in, const planner::Plan* given) {
    if (given && std::any_of(given->layers.begin(), given->layers.end(),
                             [](const planner::LayerPlacement& l) { return planner::tier_of(l.weights) == planner::Tier::Nvme; }))
        return true;
    if (in.expert_slot_bytes > 0) return true;
    const uint64_t all = std::accumulate(in.layer_bytes.begin(), in.layer_bytes.end(), in.fixed_bytes + in.other_bytes);
    return in.budget > 0 && all > in.budget;
}

void measure_model_file_reads(planner::DiskProfile& disk, const std::filesystem::path& file) {
    try {
        const storage::File f = storage::File::open_read(file, storage::OpenMode::DirectOrBuffered);
        const uint64_t bytes = std::min(kSampleBytes, f.size());
        if (!f.direct() || bytes < kMinSampleBytes) return;
        const unsigned chunks = stream_read_chunks(disk);
        const double gbps = file_gbps(file, bytes, chunks);
        const double inflight = double(chunks) * double(probe::kReadRequestBytes);
        const double probe_gbps = disk.read_gbps_at(inflight);
        if (gbps <= 0 || probe_gbps <= 0) return;
        disk.model_file_scale = gbps / probe_gbps;
        STRATA_LOG_INFO("placement: the model file reads at {:.2f} GB/s with {} MiB in flight, {:.2f} of the probe's {:.2f}; "
                        "layers read from it are priced at that", gbps, chunks, disk.model_file_scale, probe_gbps);
    } catch (const std::exception& e) {
        STRATA_LOG_WARN("placement: could not time reads of '{}' ({}); its layers are priced at the probe's disk rate",
                        file.string(), e.what());
    }
}

}  // namespace strata::runtime
