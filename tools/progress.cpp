#include "tools/progress.h"

#include <unistd.h>

#include <cstdio>
#include <system_error>

#include "core/bytes.h"
#include "core/model_paths.h"

namespace strata::cli {

Progress::Progress(std::string label, size_t total)
    : label_(std::move(label)), total_(total), tty_(isatty(STDERR_FILENO)), start_(std::chrono::steady_clock::now()) {}

void Progress::update(size_t done, const std::string& note) {
    done_ = done;
    if (!tty_) return;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double rate = secs > 0 ? done / secs : 0;
    const double eta = rate > 0 ? (total_ - done) / rate : 0;
    constexpr int kWidth = 30;
    const int filled = total_ ? static_cast<int>(kWidth * done / total_) : kWidth;
    std::fprintf(stderr, "\r%s [%.*s%*s] %zu/%zu  %.1fs elapsed, ETA %.0fs  %s\033[K", label_.c_str(), filled,
                 "==============================", kWidth - filled, "", done, total_, secs, eta, note.c_str());
    std::fflush(stderr);
}

void Progress::finish() {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::fprintf(stderr, "%s%s: %zu/%zu done in %.1fs%s\n", tty_ ? "\r" : "", label_.c_str(), done_, total_, secs,
                 tty_ ? "\033[K" : "");
}

void announce_loading(const std::filesystem::path& model) {
    constexpr uint64_t kNoticed = 256ull << 20;  // smaller files load in well under a second
    if (!isatty(STDERR_FILENO)) return;
    std::filesystem::path path;
    try {
        path = resolve_model_path(model);
    } catch (const std::exception&) {
        return;  // the engine says what is wrong with it
    }
    std::error_code ec;
    const uintmax_t size = std::filesystem::file_size(path, ec);
    if (ec || size < kNoticed) return;
    // A line of its own: the load's warnings (and --show-plan) follow it, not join it.
    std::fprintf(stderr, "strata: loading %s (%s)\n", path.filename().string().c_str(), format_bytes(size).c_str());
}

}  // namespace strata::cli
