#pragma once
// A one-line progress bar on stderr (done/total, rate, ETA); silent when stderr is not a terminal
// except for the final line.
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <string>

namespace strata::cli {

class Progress {
public:
    Progress(std::string label, size_t total);
    void update(size_t done, const std::string& note = {});
    void finish();

private:
    std::string label_;
    size_t total_;
    size_t done_ = 0;
    bool tty_;
    std::chrono::steady_clock::time_point start_;
};

// "strata: loading NAME (SIZE)" on stderr as a model starts loading: on a terminal only, and only
// for a file large enough to take a moment (reading its weights). `model` empty: the default.
void announce_loading(const std::filesystem::path& model);

}  // namespace strata::cli
