#include "gpu/device_trace.h"

#include <algorithm>

#include "core/trace.h"

namespace strata::gpu {

void DeviceTrace::end(int begin_mark, Stream& s, const std::string& track, const char* what) {
    pending_.push_back({trace_->track(track), what, begin_mark, timer_.mark(s)});
}

size_t DeviceTrace::collect() {
    auto at = [&](double seconds) {
        return origin_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
    };
    const auto finished = [&](const Span& sp) {
        const std::optional<double> b = timer_.seconds(sp.begin), e = timer_.seconds(sp.end);
        if (!b || !e) return false;
        if (trace_) trace_->slice(sp.track, sp.what, at(*b), at(*e));
        timer_.release(sp.begin);
        timer_.release(sp.end);
        return true;
    };
    pending_.erase(std::remove_if(pending_.begin(), pending_.end(), finished), pending_.end());
    return pending_.size();
}

}  // namespace strata::gpu
