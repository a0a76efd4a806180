#include "tools/plan/plan_hardware.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "core/model_paths.h"
#include "planner/catalog.h"
#include "probe/probe.h"
#include "tools/plan/plan_inputs.h"

namespace strata::cli {

planner::HardwareProfile load_hardware(const PlanOptions& o) {
    // Catalog parts make a catalog machine (the catalog's desktop where --machine names none), a
    // dry run anyone can repeat; beside `--machine this` they replace this machine's own parts (or
    // the profile file's): "this machine with an RTX 4090".
    const bool this_machine = o.machine == kThisMachine;
    if (names_catalog_parts(o) && !this_machine) {
        if (!o.hw.empty() && !o.machine.empty())
            throw UsageError(fmt::format("--hw and --machine {} both name the machine", o.machine), "give one of them");
        if (!o.hw.empty())
            throw UsageError("--hw and catalog parts (--gpu, --cpu, ...) cannot be combined",
                             "add `--machine this` to put the parts in the profile's machine");
        return catalog_hardware(o);
    }
    planner::HardwareProfile hw;
    if (!o.hw.empty()) {
        hw = probe::load_profile(o.hw);
    } else {
        std::string source;
        hw = probe::measured_profile(source, models_dir());
        STRATA_LOG_INFO("planner: hardware profile from {}", source);
    }
    if (names_catalog_parts(o)) hw = planner::with_catalog_parts(std::move(hw), catalog_parts(o));  // `--machine this` and parts
    // Capacities given on the command line override the profile's.
    if (!o.gpu_mem.empty()) {
        if (!hw.gpu) throw UsageError("--gpu-mem given but the profile has no GPU", "name one with --gpu");
        hw.gpu->memory_bytes = capacity(o.gpu_mem, "--gpu-mem");
    }
    if (!o.dram.empty()) hw.dram.capacity_bytes = capacity(o.dram, "--dram");
    if (!o.nvme_size.empty()) hw.nvme.capacity_bytes = capacity(o.nvme_size, "--nvme-size");
    if (o.nvme_bw > 0) hw.nvme.write_gbps *= o.nvme_bw / hw.nvme.read_gbps, hw.nvme.read_gbps = o.nvme_bw;
    return hw;
}

}  // namespace strata::cli
