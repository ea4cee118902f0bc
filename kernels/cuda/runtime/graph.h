// kernels/cuda/runtime/graph.h — CUDA graphs of a device's compute stream, the GPU side of
// kernels/step_graph.h: the work a stretch of host code enqueues, recorded once (stream capture)
// and replayed with one launch, the host code not running again. Free of CUDA's headers, like
// runtime.h (graph.cu; graph_none.cpp in a build without CUDA).
//
// Memory: what the recorded code allocates comes from a pool of the graph's own (a tag of the
// device's caching allocator, kernels/caching_allocator.h) that the allocator holds for the
// graph's lifetime: every replay writes the blocks it wrote at capture, so no block of the pool
// may go to anyone else, nor back to the driver, while the graph can still be launched.
#pragma once

#include <functional>

namespace bareyolo::cuda {

struct Graph;  // the captured graph, its executable form, its memory pool

// Records what `issue` enqueues on `device`'s compute stream (kernels, copies, fills, cuDNN and
// cuBLAS calls) without running any of it, and makes it launchable. The capture is relaxed:
// `issue` may allocate (from the graph's pool) but must not wait for the device; an exception
// from `issue`, or a capture CUDA refuses, throws here and leaves nothing behind.
Graph* capture_graph(int device, const std::function<void()>& issue);
// Enqueues the recorded work on the device's compute stream, in order with everything else.
void launch_graph(Graph* graph);
// Frees the graph and hands its pool's blocks back to the device's allocator.
void destroy_graph(Graph* graph) noexcept;

// The pool a capture on this thread allocates from (an allocator tag), or nullptr when none
// runs: cuda::malloc_device's choice of free list.
const void* capture_pool();

}  // namespace bareyolo::cuda
