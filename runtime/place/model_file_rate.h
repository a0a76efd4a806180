#pragma once
// The model file's read rate where layers or experts may be read from it. A virtual or shared
// drive reads each file at the rate of where it lies: the probe measures a file it has just
// written, and a model file written earlier may read a fifth slower (BENCHMARKS.md, Memory
// tiers). Streamed layers are priced at the model file's rate, measured here at load.
#include <filesystem>

#include "planner/hardware_profile.h"
#include "planner/plan.h"
#include "runtime/weights/residency.h"

namespace strata::runtime {

// Whether a run may read weights from the model file while it decodes: its layers and head do
// not fit the DRAM budget, its experts may be cached, or the plan `given` (may be null) puts
// layers on NVMe.
bool may_stream(const ResidencyInput& in, const planner::Plan* given);

// Sets disk.model_file_scale from reads of the start of `file` (32 MiB, median of three) with the
// weights' reader's reads in flight, against the probe's curve at that depth (about 30 ms, once a
// process for a file and depth).
// Leaves it where the file opens without O_DIRECT (the page cache would answer), where it is too
// small to time, or where it cannot be read (logged; the probe's rate is then used).
void measure_model_file_reads(planner::DiskProfile& disk, const std::filesystem::path& file);

}  // namespace strata::runtime
