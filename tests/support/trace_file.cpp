#include "tests/support/trace_file.h"

#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

namespace strata::test {

std::vector<TraceSlice> read_trace(const std::filesystem::path& path) {
    std::ifstream in(path);
    const nlohmann::json events = nlohmann::json::parse(in)["traceEvents"];
    std::map<int, std::string> tracks;
    for (const nlohmann::json& e : events)
        if (e["ph"] == "M") tracks[e["tid"].get<int>()] = e["args"]["name"];
    std::vector<TraceSlice> slices;
    for (const nlohmann::json& e : events) {
        if (e["ph"] != "X") continue;
        const double ts = e["ts"], dur = e["dur"];
        slices.push_back({tracks[e["tid"].get<int>()], e["name"], ts, ts + dur});
    }
    return slices;
}

}  // namespace strata::test
