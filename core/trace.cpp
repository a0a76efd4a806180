#include "core/trace.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"

namespace strata {

Trace::Trace(std::filesystem::path path) : path_(std::move(path)), origin_(Clock::now()) {
    // A path that cannot be written is refused before the run it would record, not found at its end.
    std::ofstream out(path_, std::ios::app);
    if (!out)
        throw IoError(fmt::format("cannot write the trace '{}': {}", path_.string(), std::strerror(errno)),
                      "give --trace a file in a folder you can write");
}

Trace::~Trace() { write(); }

int Trace::track(const std::string& name) {
    std::lock_guard lock(mu_);
    for (size_t i = 0; i < tracks_.size(); ++i)
        if (tracks_[i] == name) return static_cast<int>(i);
    tracks_.push_back(name);
    return static_cast<int>(tracks_.size() - 1);
}

void Trace::slice(int track, std::string name, Clock::time_point begin, Clock::time_point end, std::string args_json) {
    auto us = [&](Clock::time_point t) { return std::chrono::duration<double, std::micro>(t - origin_).count(); };
    std::lock_guard lock(mu_);
    events_.push_back({track, std::move(name), us(begin), us(end) - us(begin), std::move(args_json)});
}

size_t Trace::size() const {
    std::lock_guard lock(mu_);
    return events_.size();
}

void Trace::write() const {
    nlohmann::json events = nlohmann::json::array();
    {
        std::lock_guard lock(mu_);
        for (size_t i = 0; i < tracks_.size(); ++i)
            events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", 1}, {"tid", i}, {"args", {{"name", tracks_[i]}}}});
        for (const auto& e : events_) {
            nlohmann::json ev = {{"ph", "X"}, {"name", e.name}, {"pid", 1}, {"tid", e.track}, {"ts", e.ts_us}, {"dur", e.dur_us}};
            if (!e.args.empty()) ev["args"] = nlohmann::json::parse(e.args, nullptr, false);
            events.push_back(std::move(ev));
        }
    }
    std::ofstream out(path_);
    out << nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() << "\n";
    if (!out) STRATA_LOG_WARN("trace: could not write {}", path_.string());
}

}  // namespace strata
