#pragma once
// A --trace file (Chrome's trace event format) read back: its slices, each with its track's name.
#include <filesystem>
#include <string>
#include <vector>

namespace strata::test {

struct TraceSlice {
    std::string track, name;
    double begin_us = 0, end_us = 0;
};

// Every complete slice ("ph": "X") of the file, in the file's order.
std::vector<TraceSlice> read_trace(const std::filesystem::path& path);

}  // namespace strata::test
