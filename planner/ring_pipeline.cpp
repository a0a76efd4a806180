#include "planner/ring_pipeline.h"

#include <algorithm>
#include <cstddef>

namespace strata::planner {

double ring_pipeline_s(const std::vector<double>& compute, const std::vector<double>& read, double tail, int slots) {
    std::vector<size_t> streamed;
    for (size_t i = 0; i < read.size(); ++i)
        if (read[i] > 0) streamed.push_back(i);
    double total = tail;
    for (double c : compute) total += c;
    if (streamed.empty() || slots <= 0) return total;
    const size_t k = streamed.size(), depth = std::min<size_t>(static_cast<size_t>(slots), k);
    // Three passes: the first starts with an empty ring, the third is the steady state.
    constexpr int kPasses = 3;
    std::vector<double> read_end(k * kPasses, 0), compute_end(k * kPasses, 0);
    double disk_free = 0, cpu_free = 0, pass_start = 0, last = 0;
    size_t next_read = 0;  // reads are issued in order, each once its buffer is free
    for (int pass = 0; pass < kPasses; ++pass) {
        pass_start = cpu_free;
        auto issue_reads_until = [&](size_t j_needed) {
            for (; next_read <= j_needed; ++next_read) {
                const double buffer_free = next_read >= depth ? compute_end[next_read - depth] : 0;
                const double start = std::max(disk_free, buffer_free);
                disk_free = read_end[next_read] = start + read[streamed[next_read % k]];
            }
        };
        size_t j = static_cast<size_t>(pass) * k;  // this pass's streamed layers, in order
        for (size_t i = 0; i < compute.size(); ++i) {
            double start = cpu_free;
            if (j < (static_cast<size_t>(pass) + 1) * k && streamed[j % k] == i) {
                issue_reads_until(j);
                start = std::max(start, read_end[j]);
                cpu_free = compute_end[j] = start + compute[i];
                ++j;
                // Buffers freed by this compute let the next reads go.
                if (j < k * kPasses) issue_reads_until(std::min(j + depth - 1, k * kPasses - 1));
            } else {
                cpu_free = start + compute[i];
            }
        }
        cpu_free += tail;
        last = cpu_free - pass_start;
    }
    return std::max(last, total);
}

}  // namespace strata::planner
