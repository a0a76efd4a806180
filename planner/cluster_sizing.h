#pragma once
// When a workload outgrows one machine: how many GPUs of one catalog kind a distributed engine
// (vLLM, SGLang, llama.cpp over RPC) needs for it. The smallest group of GPUs whose memory
// holds the weights and the KV budget (every sequence at its full context), tensor parallel
// within a node and pipeline stages across nodes, and, given a decode target, enough tensor
// parallelism that each token's weight reads, split over the group, meet it. Pure arithmetic
// over ModelShape and the catalog; the reasoning is kept as sentences for the launch's comments.
#include <cstdint>
#include <string>
#include <vector>

#include "planner/catalog.h"
#include "planner/model_shape.h"

namespace strata::planner {

struct ClusterRequest {
    GpuEntry gpu;                      // the cluster's kind of GPU
    int gpus_per_node = 8;
    int n_ctx = 0;                     // each sequence's context (prompt and generated tokens)
    int max_seqs = 1;                  // sequences served at once
    double memory_utilization = 0.90;  // the share of a GPU's memory the engine takes (vLLM's default)
    double target_tps = 0;             // decode tokens/s each sequence should see; 0: none
    Efficiency efficiency;             // the catalog's: what share of the memory bandwidth a decode reaches
    bool layers_only = false;          // the engine splits layers only (llama.cpp): GPUs take turns, none in parallel
};

struct ClusterSizing {
    int tensor_parallel = 1, pipeline_parallel = 1;
    int nodes = 1, gpus_per_node = 1;  // GPUs used on each node
    uint64_t weight_bytes = 0;
    uint64_t kv_budget_bytes = 0;      // max_seqs sequences at n_ctx positions
    uint64_t per_gpu_bytes = 0;        // weights, KV and activations on each GPU
    uint64_t usable_per_gpu_bytes = 0;
    double decode_tps = 0;             // predicted per sequence, bound by memory bandwidth
    bool meets_target = true;          // false: even a whole node's tensor parallelism misses target_tps
    std::vector<std::string> reasons;  // how the numbers above follow, one sentence each
};

// Memory a GPU keeps for the engine's activations, CUDA graphs and context beside weights and KV.
inline constexpr uint64_t kGpuRuntimeReserve = 2ull << 30;

// Throws UsageError when no cluster of up to 128 nodes holds the model.
ClusterSizing size_cluster(const ModelShape& shape, const ClusterRequest& req);

}  // namespace strata::planner
