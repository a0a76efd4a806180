#pragma once
// --op-offload and what it settles for a device placement: from which row count a prompt's
// pass copies the plan's CPU layers to the device and computes them there (planner/op_offload.h).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace strata::runtime {

struct Placement;

// auto: from the rows the planner predicts the device faster; on: every prompt pass; off:
// never; N: prompt passes of N rows or more.
struct OpOffloadMode {
    enum Kind { Auto, On, Off, Rows };
    Kind kind = Auto;
    int32_t rows = 0;  // Rows
    bool operator==(const OpOffloadMode&) const = default;
};
// "auto", "on", "off" or a positive row count; nullopt for anything else.
std::optional<OpOffloadMode> parse_op_offload(std::string_view s);

// Sets p.op_offload (the planner's prices) and p.op_offload_rows (what runs) for passes of at
// most `max_rows` rows.
void settle_op_offload(Placement& p, const OpOffloadMode& mode, int32_t max_rows);

// One line for --show-plan: the CPU layers, from which rows they are computed on the device and
// why, where the device's copies come from, the predicted first token both ways; empty where the
// plan has no CPU layers.
std::string describe_op_offload(const Placement& p);

}  // namespace strata::runtime
