// kernels/cpu/step_graph.cpp — see kernels/step_graph.h: the device's choice, made here in the
// dispatch layer.
#include "kernels/step_graph.h"

#include <stdexcept>

#include "kernels/cuda/runtime/graph.h"
#include "kernels/route.h"

namespace bareyolo {

bool StepGraph::supported(const Device& device) {
  return device.is_cuda() && ops::kCudaKernelsCompiled;
}

StepGraph::StepGraph(const Device& device, const std::function<void()>& issue) {
  if (!supported(device))
    throw std::invalid_argument("a step graph records a GPU's work; " + device.str() +
                                " has none (--cuda-graph on needs a CUDA device)");
  graph_ = cuda::capture_graph(device.index, issue);
}

StepGraph::~StepGraph() { cuda::destroy_graph(graph_); }

void StepGraph::replay() { cuda::launch_graph(graph_); }

}  // namespace bareyolo
