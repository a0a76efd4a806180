#include "runtime/host_memory.h"

#include <algorithm>

#include "core/error.h"
#include "models/gguf_file.h"
#include "models/hparams.h"
#include "runtime/exec/cpu/cpu_backend.h"
#include "runtime/exec/device/device_backend.h"
#include "runtime/place/run_layout.h"
#include "runtime/weights/weight_store.h"
#include "storage/budget.h"

namespace strata::runtime {

uint64_t batch_logits_bytes(const models::Hparams& hp, int pass_rows) {
    return 2 * uint64_t(pass_rows > 1 ? pass_rows - 1 : 0) * uint64_t(hp.n_vocab) * sizeof(float);
}

uint64_t host_activation_bytes(const models::Hparams& hp, int pass_rows) {
    return CpuBackend::activation_bytes(hp) + uint64_t(hp.n_vocab) * sizeof(float) + batch_logits_bytes(hp, pass_rows);
}

uint64_t least_dram_for_plan(const models::GgufFile& file, const planner::Plan& plan, const HostRun& run) {
    const models::Hparams hp = models::Hparams::from_gguf(file);
    const KvSize kv = kv_size(hp, run.n_ctx * run.n_batch, run.n_ctx, run.kv_type, &plan);
    const storage::MemoryBudget unlimited("DRAM", UINT64_MAX, "--dram");
    const ResidencyInput in = WeightStore::residency_input(file, hp, unlimited, kv.all_bytes + host_activation_bytes(hp, planned_logit_rows(run.n_batch, run.decode_rows)),
                                                           run.prefetch_depth);
    if (!plan.has_gpu) return given_plan_least_dram(in, kv, plan);
    if (hp.moe.enabled())
        throw UsageError("a mixture of experts on a device runs by the runtime's own placement, not a plan's",
                         "plan it without a GPU, or let the runtime place it (leave --plan out)");
    const uint64_t largest = *std::max_element(in.layer_bytes.begin(), in.layer_bytes.end());
    return given_device_plan_least_dram(in, DeviceBackend::host_footprint(hp, run.n_ctx, largest), kv, plan);
}

}  // namespace strata::runtime
