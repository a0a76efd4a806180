#include "tools/plan/launch_export.h"

#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"
#include "planner/catalog.h"

namespace strata::cli {

using namespace strata::planner;

namespace {

constexpr int kRayPort = 6379, kSglangDistPort = 5000, kRpcPort = 50052;

// What the engine loads and answers as.
struct Model {
    std::string ref;        // a GGUF path, a Hugging Face repository, or a shell variable for a GGUF to supply
    std::string served_as;  // the name clients give it
    bool gguf = false;
    std::string note;       // how the engine's weights differ from the plan's, when they do
};

// A catalog shape's Hugging Face repository, from the config.json URL the catalog cites.
std::string hf_repo(const ModelShape& s) {
    const ModelEntry* e = Catalog::builtin().find_model(s.name);
    const std::string url = e ? e->source : "";
    const std::string host = "huggingface.co/";
    const size_t at = url.find(host);
    if (at == std::string::npos) return s.name;
    const std::string path = url.substr(at + host.size());
    const size_t org = path.find('/');
    const size_t repo_end = org == std::string::npos ? std::string::npos : path.find('/', org + 1);
    return path.substr(0, repo_end);
}

// vLLM and SGLang load a GGUF file as it is, and a catalog shape as its Hugging Face
// checkpoint in 16-bit (sized so); llama.cpp needs a GGUF file, the plan's type of one.
Model engine_model(LaunchEngine e, ModelShape& shape) {
    const bool from_file = shape.source != "catalog";
    if (from_file) return {shape.source, std::filesystem::path(shape.source).stem().string(), true, {}};
    if (e == LaunchEngine::LlamaRpc)
        return {"$MODEL", shape.name, true,
                fmt::format("MODEL is a GGUF file of {} in {} (the plan's weights), on the head node", shape.name, dtype_name(shape.weight_type))};
    std::string note;
    if (shape.weight_type != DType::F16 && shape.weight_type != DType::BF16) {
        note = fmt::format("the plan's {} weights are a GGUF file's; this engine loads the BF16 checkpoint named here, so it is sized as BF16",
                           dtype_name(shape.weight_type));
        shape = ModelShape::from_catalog(shape.name, DType::F16, shape.kv_type);
    }
    return {hf_repo(shape), shape.name, false, note};
}

// The engines' names for an 8-bit KV cache; 16-bit is each engine's default ("auto").
std::string kv_cache_type(LaunchEngine e, DType kv) {
    const bool quantized = kv == DType::Q8_0 || kv == DType::Q4_0;
    if (e == LaunchEngine::LlamaRpc) return quantized ? std::string(kv == DType::Q8_0 ? "q8_0" : "q4_0") : "f16";
    if (!quantized) return "auto";
    return e == LaunchEngine::Vllm ? "fp8" : "fp8_e5m2";
}

std::string header(const char* engine, const char* checked, const Model& m, const LaunchInput& in, const ClusterSizing& c) {
    std::string s = fmt::format("#!/bin/sh\n# {} launch for {}, written by `strata plan --export` (its flags are those of {}).\n",
                                engine, m.served_as, checked);
    s += fmt::format("# Why: {}\n", in.verdict);
    s += fmt::format("# Workload: {} sequences at once, {} prompt + {} generated tokens each.\n", in.workload.batch,
                     in.workload.prompt_len, in.workload.gen_len);
    s += "# Sizing, from Strata's catalog:\n";
    for (const std::string& r : c.reasons) s += "#   " + r + "\n";
    if (!m.note.empty()) s += "#   " + m.note + "\n";
    s += "set -eu\n";
    if (c.nodes > 1) {
        s += fmt::format("# Run this on each of the {} nodes ({} GPUs each) with NODE_RANK set: 0 on the head node, {} on the {}.\n",
                         c.nodes, c.gpus_per_node, c.nodes == 2 ? std::string("1") : fmt::format("1 to {}", c.nodes - 1),
                         c.nodes == 2 ? "other" : "others");
        s += "NODE_RANK=${NODE_RANK:?set NODE_RANK: 0 on the head node, 1 and up on the others}\n";
        s += "HEAD=${HEAD:?set HEAD to the address of the head node}\n";
    }
    if (m.ref == "$MODEL") s += "MODEL=${MODEL:?set MODEL to the GGUF file}\n";
    return s;
}

// One command, a flag to a line.
std::string command(const std::string& program, const std::vector<std::string>& args) {
    std::string s = "exec " + program;
    for (const std::string& a : args) s += " \\\n  " + a;
    return s + "\n";
}

std::string vllm(const Model& m, const LaunchInput& in, const ClusterSizing& c, const ClusterRequest& r, DType kv) {
    std::string s = header("vLLM", "vllm 0.7.3's `vllm serve` and ray 2.40's `ray start`", m, in, c);
    if (c.nodes > 1) {
        s += "# The other nodes join the head node's Ray cluster; vLLM places the pipeline stages on them.\n";
        s += fmt::format("if [ \"$NODE_RANK\" -ne 0 ]; then\n  exec ray start --address \"$HEAD:{}\" --num-gpus {} --block\nfi\n", kRayPort,
                         c.gpus_per_node);
        s += fmt::format("ray start --head --port {} --num-gpus {}\n", kRayPort, c.gpus_per_node);
    }
    std::vector<std::string> args = {fmt::format("--tensor-parallel-size {}", c.tensor_parallel),
                                     fmt::format("--pipeline-parallel-size {}", c.pipeline_parallel),
                                     fmt::format("--max-model-len {}", in.workload.context_len()),
                                     fmt::format("--max-num-seqs {}", in.workload.batch),
                                     fmt::format("--gpu-memory-utilization {:.2f}", r.memory_utilization),
                                     fmt::format("--kv-cache-dtype {}", kv_cache_type(LaunchEngine::Vllm, kv)),
                                     fmt::format("--served-model-name {}", m.served_as), "--host 0.0.0.0", "--port 8000"};
    if (c.nodes > 1) args.insert(args.begin() + 2, "--distributed-executor-backend ray");
    if (!m.gguf) args.push_back("--dtype bfloat16");
    return s + command(fmt::format("vllm serve \"{}\"", m.ref), args);
}

std::string sglang(const Model& m, const LaunchInput& in, const ClusterSizing& c, const ClusterRequest& r, DType kv) {
    std::string s = header("SGLang", "sglang 0.4.6.post5's launch_server", m, in, c);
    std::vector<std::string> args = {fmt::format("--model-path \"{}\"", m.ref), fmt::format("--tp-size {}", c.tensor_parallel),
                                     fmt::format("--pp-size {}", c.pipeline_parallel),
                                     fmt::format("--context-length {}", in.workload.context_len()),
                                     fmt::format("--max-running-requests {}", in.workload.batch),
                                     fmt::format("--mem-fraction-static {:.2f}", r.memory_utilization),
                                     fmt::format("--kv-cache-dtype {}", kv_cache_type(LaunchEngine::Sglang, kv)),
                                     fmt::format("--served-model-name {}", m.served_as), "--host 0.0.0.0", "--port 30000"};
    if (c.nodes > 1) {
        args.push_back(fmt::format("--nnodes {}", c.nodes));
        args.push_back("--node-rank \"$NODE_RANK\"");
        args.push_back(fmt::format("--dist-init-addr \"$HEAD:{}\"", kSglangDistPort));
    }
    if (m.gguf) args.insert(args.end(), {"--load-format gguf", "--quantization gguf"});
    else args.push_back("--dtype bfloat16");
    return s + command("python3 -m sglang.launch_server", args);
}

std::string llama_rpc(const Model& m, const LaunchInput& in, const ClusterSizing& c, DType kv) {
    std::string s = header("llama.cpp (llama-server over rpc-server)", "llama.cpp's llama-server and rpc-server, as llama-cpp-python 0.3.9 vendors them", m, in, c);
    s += "# llama.cpp splits the layers over every GPU, its own and the other nodes' (served by rpc-server), in\n"
         "# proportion to their memory: the pipeline stages above, one after another (no tensor parallelism).\n";
    if (c.nodes > 1) {
        s += "# rpc-server takes commands from anyone who reaches its port: keep the nodes on a private network.\n";
        s += fmt::format("if [ \"$NODE_RANK\" -ne 0 ]; then\n  exec rpc-server --host 0.0.0.0 --port {} --cache\nfi\n", kRpcPort);
        s += "WORKERS=${WORKERS:?set WORKERS to the addresses of the other nodes, separated by spaces}\n";
        s += fmt::format("RPC=$(for w in $WORKERS; do printf '%s:{},' \"$w\"; done)\n", kRpcPort);
    }
    // llama-server's context is shared by its slots: every sequence's, together.
    std::vector<std::string> args = {fmt::format("--model \"{}\"", m.ref), "--n-gpu-layers 999",
                                     fmt::format("--ctx-size {}", in.workload.context_len() * in.workload.batch),
                                     fmt::format("--parallel {}", in.workload.batch), "--host 0.0.0.0", "--port 8080"};
    if (c.nodes > 1) args.insert(args.begin() + 1, "--rpc \"${RPC%,}\"");
    if (const std::string t = kv_cache_type(LaunchEngine::LlamaRpc, kv); t != "f16")  // a quantized V cache needs flash attention
        args.insert(args.end(), {"--cache-type-k " + t, "--cache-type-v " + t, "--flash-attn"});
    return s + command("llama-server", args);
}

}  // namespace

std::optional<LaunchEngine> launch_engine(std::string_view name) {
    if (name == "vllm") return LaunchEngine::Vllm;
    if (name == "sglang") return LaunchEngine::Sglang;
    if (name == "llama-rpc") return LaunchEngine::LlamaRpc;
    return std::nullopt;
}

std::string launch_script(LaunchEngine engine, const LaunchInput& in, const ClusterRequest& cluster) {
    ModelShape shape = in.shape;
    const Model m = engine_model(engine, shape);
    ClusterRequest r = cluster;
    r.n_ctx = in.workload.context_len();
    r.max_seqs = in.workload.batch;
    r.layers_only = engine == LaunchEngine::LlamaRpc;
    const ClusterSizing c = size_cluster(shape, r);
    switch (engine) {
        case LaunchEngine::Vllm: return vllm(m, in, c, r, shape.kv_type);
        case LaunchEngine::Sglang: return sglang(m, in, c, r, shape.kv_type);
        case LaunchEngine::LlamaRpc: return llama_rpc(m, in, c, shape.kv_type);
    }
    return {};
}

}  // namespace strata::cli
