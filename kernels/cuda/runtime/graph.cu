// kernels/cuda/runtime/graph.cu — see graph.h.
#include "kernels/cuda/runtime/graph.h"

#include <cuda_runtime.h>

#include <stdexcept>

#include "kernels/cuda/runtime/allocator.h"
#include "kernels/cuda/runtime/check.h"
#include "kernels/cuda/runtime/stream.h"

namespace bareyolo::cuda {

struct Graph {
  int device = 0;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  char pool = 0;  // its address is the pool's tag in the allocator
};

namespace {

thread_local const void* t_capture_pool = nullptr;

// Ends a capture that failed, dropping what it recorded and the graph's pool.
void abandon(Graph* graph, cudaStream_t stream) noexcept {
  t_capture_pool = nullptr;
  cudaGraph_t partial = nullptr;
  (void)cudaStreamEndCapture(stream, &partial);
  if (partial) (void)cudaGraphDestroy(partial);
  (void)cudaGetLastError();  // the failed capture's error is reported by the caller
  device_allocator(graph->device).release_pool(&graph->pool);
  delete graph;
}

}  // namespace

const void* capture_pool() { return t_capture_pool; }

Graph* capture_graph(int device, const std::function<void()>& issue) {
  const cudaStream_t stream = stream_of(device);
  BAREYOLO_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
  auto* graph = new Graph{.device = device};
  device_allocator(device).hold_pool(&graph->pool, compute_stream(device));
  t_capture_pool = &graph->pool;
  try {
    issue();
  } catch (const std::exception& error) {
    abandon(graph, stream);
    throw std::runtime_error(std::string(error.what()) +
                             " (while recording the step as a CUDA graph; --cuda-graph off "
                             "launches its kernels one by one)");
  } catch (...) {
    abandon(graph, stream);  // the stream must not stay in capture mode
    throw;
  }
  t_capture_pool = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph->graph);
  if (ended != cudaSuccess) {
    (void)cudaGetLastError();
    device_allocator(device).release_pool(&graph->pool);
    delete graph;
    throw std::runtime_error(std::string("CUDA refused the step's graph: ") +
                             cudaGetErrorString(ended) +
                             " (something in it waited for the device or used another stream "
                             "without an event; run with --cuda-graph off)");
  }
  const cudaError_t instantiated = cudaGraphInstantiate(&graph->exec, graph->graph, 0);
  if (instantiated != cudaSuccess) {
    destroy_graph(graph);
    BAREYOLO_CUDA_CHECK(instantiated);
  }
  return graph;
}

void launch_graph(Graph* graph) {
  count_launch();  // one, however many kernels it replays
  BAREYOLO_CUDA_CHECK(cudaGraphLaunch(graph->exec, stream_of(graph->device)));
}

void destroy_graph(Graph* graph) noexcept {
  if (!graph) return;
  if (graph->exec) (void)cudaGraphExecDestroy(graph->exec);
  if (graph->graph) (void)cudaGraphDestroy(graph->graph);
  device_allocator(graph->device).release_pool(&graph->pool);
  delete graph;
}

}  // namespace bareyolo::cuda
