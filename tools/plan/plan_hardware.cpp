#include "tools/plan/plan_hardware.h"

#include "core/error.h"
#include "core/log.h"
#include "core/model_paths.h"
#include "probe/probe.h"
#include "tools/plan/plan_inputs.h"

namespace strata::cli {

planner::HardwareProfile load_hardware(const PlanOptions& o) {
    const bool dry_run = names_catalog_parts(o);
    if (!o.hw.empty() && dry_run) throw UsageError("--hw and catalog parts (--gpu, --machine, ...) cannot be combined");
    if (dry_run) return catalog_hardware(o);
    planner::HardwareProfile hw;
    if (!o.hw.empty()) {
        hw = probe::load_profile(o.hw);
    } else {
        std::string source;
        hw = probe::measured_profile(source, models_dir());
        STRATA_LOG_INFO("planner: hardware profile from {}", source);
    }
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
