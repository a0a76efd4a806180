#include "planner/workload.h"

#include <charconv>
#include <string>

#include <fmt/format.h>

#include "core/error.h"

namespace strata::planner {

std::string_view objective_name(Objective o) { return o == Objective::Latency ? "latency" : "throughput"; }

std::optional<Objective> objective_from_name(std::string_view n) {
    if (n == "latency") return Objective::Latency;
    if (n == "throughput") return Objective::Throughput;
    return std::nullopt;
}

void Workload::validate() const {
    auto check = [](int32_t v, const char* what, int32_t max) {
        if (v <= 0 || v > max)
            throw UsageError(fmt::format("{} is {}, expected 1..{}", what, v, max));
    };
    check(prompt_len, "the prompt length", 1 << 22);
    check(gen_len, "the generation length", 1 << 22);
    check(batch, "the batch size", 1 << 20);
    check(decode_rows, "the rows a decode step verifies per sequence", 1 << 16);
}

void Workload::apply(std::string_view spec) {
    while (!spec.empty()) {
        const size_t comma = spec.find(',');
        const std::string_view item = spec.substr(0, comma);
        spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
        const size_t eq = item.find('=');
        const std::string_view key = item.substr(0, eq), value = eq == std::string_view::npos ? "" : item.substr(eq + 1);
        if (key == "objective") {
            auto o = objective_from_name(value);
            if (!o) throw UsageError(fmt::format("workload item '{}': objective must be latency or throughput", item));
            objective = *o;
            continue;
        }
        int32_t v = 0;
        auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
        if (ec != std::errc() || p != value.data() + value.size())
            throw UsageError(fmt::format("workload item '{}' is not KEY=NUMBER", item),
                             "write e.g. prompt=512,gen=128,batch=8,objective=throughput");
        if (key == "prompt") prompt_len = v;
        else if (key == "gen") gen_len = v;
        else if (key == "batch") batch = v;
        else throw UsageError(fmt::format("workload item '{}': unknown key '{}'", item, key), "keys: prompt, gen, batch, objective");
    }
    validate();
}

}  // namespace strata::planner
