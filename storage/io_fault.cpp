#include "storage/io_fault.h"

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <fmt/format.h>
#include <string>

#include "core/error.h"

namespace strata::storage {

FaultSpec FaultSpec::parse(std::string_view text) {
    if (text.empty() || text == "none") return {};
    const auto colon = text.find(':');
    const std::string_view kind = text.substr(0, colon);
    FaultSpec spec;
    if (kind == "eio") spec.kind = FaultKind::Eio;
    else if (kind == "short") spec.kind = FaultKind::Short;
    else if (kind == "lost") spec.kind = FaultKind::Lost;
    const std::string_view num = colon == std::string_view::npos ? std::string_view{} : text.substr(colon + 1);
    const auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), spec.nth);
    if (spec.kind == FaultKind::None || num.empty() || ec != std::errc() || end != num.data() + num.size() ||
        spec.nth == 0)
        throw UsageError(fmt::format("invalid I/O fault '{}'", text),
                         "STRATA_FAULT_IO takes eio:N, short:N or lost:N, with N >= 1 the read to break");
    return spec;
}

FaultSpec FaultSpec::from_env() {
    const char* env = std::getenv("STRATA_FAULT_IO");
    return env ? parse(env) : FaultSpec{};
}

bool FaultInjector::loses(uint64_t seq) { return spec_.kind == FaultKind::Lost && seq == spec_.nth && !fired_.exchange(true); }

long FaultInjector::filter(uint64_t seq, long result, size_t granule) {
    if (spec_.kind == FaultKind::None || spec_.kind == FaultKind::Lost || seq < spec_.nth || fired_.load(std::memory_order_relaxed))
        return result;
    if (spec_.kind == FaultKind::Eio) {
        if (seq != spec_.nth || fired_.exchange(true)) return result;
        return -EIO;
    }
    // Short: keep half, rounded down to the granule, so the remainder can be reissued.
    if (result <= static_cast<long>(granule)) return result;
    const long cut = static_cast<long>((static_cast<size_t>(result) / 2) / granule * granule);
    if (cut <= 0 || fired_.exchange(true)) return result;
    return cut;
}

}  // namespace strata::storage
