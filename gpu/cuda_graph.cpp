#include "gpu/cuda_graph.h"

#include "gpu/cuda_check.h"

namespace strata::gpu {
namespace {

class CudaGraph final : public Graph {
public:
    explicit CudaGraph(cudaGraph_t graph) : graph_(graph) {
        const cudaError_t err = cudaGraphInstantiate(&exec_, graph_, 0);
        if (err != cudaSuccess) cudaGraphDestroy(graph_);
        cuda_check(err, "cudaGraphInstantiate");
    }
    ~CudaGraph() override {
        cudaGraphExecDestroy(exec_);
        cudaGraphDestroy(graph_);
    }
    CudaGraph(const CudaGraph&) = delete;
    CudaGraph& operator=(const CudaGraph&) = delete;

    void launch(Stream& s) override { cuda_check(cudaGraphLaunch(exec_, cuda(s).get()), "cudaGraphLaunch"); }

private:
    cudaGraph_t graph_ = nullptr;
    cudaGraphExec_t exec_ = nullptr;
};

}  // namespace

std::unique_ptr<Graph> capture_cuda_graph(CudaStream& s, const std::function<void()>& work) {
    // Thread-local mode: another thread's unrelated CUDA calls do not break this capture.
    cuda_check(cudaStreamBeginCapture(s.get(), cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    try {
        work();
    } catch (...) {
        cudaGraph_t partial = nullptr;
        cudaStreamEndCapture(s.get(), &partial);
        if (partial) cudaGraphDestroy(partial);
        cudaGetLastError();  // clear the capture's error state
        throw;
    }
    cudaGraph_t graph = nullptr;
    cuda_check(cudaStreamEndCapture(s.get(), &graph), "cudaStreamEndCapture (the captured work broke a capture rule)");
    return std::make_unique<CudaGraph>(graph);
}

}  // namespace strata::gpu
