// kernels/step_graph.h — a recording of the device work a stretch of host code issues, replayed
// without running that code again: a CUDA graph on a GPU (kernels/cuda/runtime/graph.h). The
// Solver records its step's kernels once and replays them each step (models/train/solver.h):
// ~700 launches and their host overhead become one.
//
// A recording is right for a later step only if that step would issue the same work: the same
// ops, shapes and buffers, and every number that changes from step to step read from device
// memory (kernels/op_sequence.h shows it on the CPU). The CPU has no graphs: supported() says
// so, and a StepGraph cannot be made for it.
#pragma once

#include <functional>

#include "kernels/view.h"

namespace bareyolo {

namespace cuda {
struct Graph;
}

class StepGraph {
 public:
  // Whether `device` can record one in this binary: a GPU with CUDA compiled in.
  static bool supported(const Device& device);

  // Records what `issue` enqueues on `device` without running it (see graph.h for its memory).
  StepGraph(const Device& device, const std::function<void()>& issue);
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  // Enqueues the recorded work, in order with the device's other work.
  void replay();

 private:
  cuda::Graph* graph_ = nullptr;
};

}  // namespace bareyolo
