// kernels/cuda/runtime/graph_none.cpp — graph.h for a binary built without CUDA: nothing can
// be captured (kernels/step_graph.h refuses first, naming the device).
#include <stdexcept>

#include "kernels/cuda/runtime/graph.h"

namespace bareyolo::cuda {

Graph* capture_graph(int, const std::function<void()>&) {
  throw std::runtime_error("this bareyolo was built without CUDA: no CUDA graphs");
}
void launch_graph(Graph*) {
  throw std::runtime_error("this bareyolo was built without CUDA: no CUDA graphs");
}
void destroy_graph(Graph*) noexcept {}
const void* capture_pool() { return nullptr; }

}  // namespace bareyolo::cuda
