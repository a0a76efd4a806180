#include "planner/cluster_sizing.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/bytes.h"
#include "core/error.h"

namespace strata::planner {

namespace {

constexpr int kMaxNodes = 128;

// Tensor parallelism splits the attention heads: the engines want every rank to hold whole
// heads (vLLM: n_head % tp == 0, and KV heads split or replicated evenly).
bool splits_heads(const ModelShape& s, int tp) {
    if (s.n_head % tp != 0) return false;
    return s.n_head_kv % tp == 0 || tp % s.n_head_kv == 0;
}

// Decode tokens/s of one sequence: each token reads every weight once and its KV cache, the
// group reading its shares at once (pipeline stages take turns, so they add no speed).
double decode_tps(const ModelShape& s, uint64_t weights, int n_ctx, int tp, const ClusterRequest& r) {
    const double kv_read = s.kv_bytes_per_token() * s.n_layer * n_ctx / 2.0;  // half the context, on average
    const double rate = r.gpu.mem_gbps * 1e9 * r.efficiency.gpu_mem * tp;
    return rate / (static_cast<double>(weights) + kv_read);
}

}  // namespace

ClusterSizing size_cluster(const ModelShape& shape, const ClusterRequest& req) {
    if (req.gpus_per_node < 1 || req.n_ctx < 1 || req.max_seqs < 1 || req.gpu.memory_bytes == 0)
        throw UsageError("a cluster needs at least one GPU a node, one sequence and a context");
    ClusterSizing c;
    c.weight_bytes = shape.total_weight_bytes();
    c.kv_budget_bytes = static_cast<uint64_t>(shape.kv_bytes_per_token() * shape.n_layer * req.n_ctx * req.max_seqs);
    const uint64_t offered = static_cast<uint64_t>(static_cast<double>(req.gpu.memory_bytes) * req.memory_utilization);
    c.usable_per_gpu_bytes = offered > kGpuRuntimeReserve ? offered - kGpuRuntimeReserve : 0;
    c.reasons.push_back(fmt::format("weights: {} ({} parameters); KV budget: {} = {} sequences x {} positions x {} a position ({})",
                                    format_bytes(c.weight_bytes), shape.n_params, format_bytes(c.kv_budget_bytes), req.max_seqs, req.n_ctx,
                                    format_bytes(static_cast<uint64_t>(shape.kv_bytes_per_token() * shape.n_layer)),
                                    dtype_name(shape.kv_type)));
    c.reasons.push_back(fmt::format("one {} offers {} of its {} at {:.0f}% use, less {} for activations and CUDA graphs",
                                    req.gpu.name, format_bytes(c.usable_per_gpu_bytes), format_bytes(req.gpu.memory_bytes),
                                    req.memory_utilization * 100, format_bytes(kGpuRuntimeReserve)));
    const uint64_t need = c.weight_bytes + c.kv_budget_bytes;
    bool found = false;
    for (int n = 1; n <= req.gpus_per_node * kMaxNodes; n *= 2) {
        const int tp = std::min(n, req.gpus_per_node);
        const int pp = n / tp;
        if (n % tp != 0 || pp > shape.n_layer || !splits_heads(shape, tp)) continue;
        if (need / static_cast<uint64_t>(n) > c.usable_per_gpu_bytes) continue;
        const uint64_t per_gpu = need / static_cast<uint64_t>(n) + kGpuRuntimeReserve;
        const double tps = decode_tps(shape, c.weight_bytes, req.n_ctx, req.layers_only ? 1 : tp, req);
        c.tensor_parallel = tp, c.pipeline_parallel = pp, c.per_gpu_bytes = per_gpu, c.decode_tps = tps;
        found = true;
        // More pipeline stages hold more but decode no faster: past a node, stop at the first that fits.
        if (req.target_tps <= 0 || tps >= req.target_tps || tp == req.gpus_per_node || req.layers_only) break;
    }
    if (!found)
        throw UsageError(fmt::format("{} of weights and KV does not fit even {} nodes of {} {}", format_bytes(need), kMaxNodes,
                                     req.gpus_per_node, req.gpu.name),
                         "lower the batch or the context, or choose a GPU with more memory");
    const int n = c.tensor_parallel * c.pipeline_parallel;
    c.nodes = std::max(1, n / req.gpus_per_node);
    c.gpus_per_node = n / c.nodes;
    const std::string split =
        req.layers_only ? fmt::format("the layers split over {} GPU{} a node", c.gpus_per_node, c.gpus_per_node == 1 ? "" : "s")
                        : fmt::format("tensor parallel {} within a node", c.tensor_parallel);
    const std::string across = c.nodes == 1 ? std::string()
                               : req.layers_only ? fmt::format(", on {} nodes", c.nodes)
                                                 : fmt::format(", pipeline parallel {} across {} nodes", c.pipeline_parallel, c.nodes);
    c.reasons.push_back(fmt::format("so {} GPU{} ({} a GPU): {}{}", n, n == 1 ? "" : "s", format_bytes(c.per_gpu_bytes), split, across));
    c.reasons.push_back(fmt::format("decode: about {:.1f} tokens/s a sequence, each token reading the weights {} at {:.0f} GB/s x {:.2f} a GPU",
                                    c.decode_tps,
                                    req.layers_only ? std::string("one GPU after another")
                                                    : fmt::format("split {} ways", c.tensor_parallel),
                                    req.gpu.mem_gbps, req.efficiency.gpu_mem));
    if (req.target_tps > 0) {
        c.meets_target = c.decode_tps >= req.target_tps;
        c.reasons.push_back(c.meets_target ? fmt::format("that meets the target of {:.1f} tokens/s", req.target_tps)
                                           : fmt::format("that misses the target of {:.1f} tokens/s even with a whole node's tensor "
                                                         "parallelism: choose a GPU with faster memory, or lighter weights",
                                                         req.target_tps));
    }
    return c;
}

}  // namespace strata::planner
