#pragma once
// Device::capture on CUDA: the stream's work recorded with stream capture into a CUDA graph,
// instantiated once and launched as one unit (one launch for a whole decode step).
#include <functional>
#include <memory>

#include "gpu/cuda_stream.h"

namespace strata::gpu {

std::unique_ptr<Graph> capture_cuda_graph(CudaStream& s, const std::function<void()>& work);

}  // namespace strata::gpu
