// engine/optim/ema.h — ModelEMA: an exponential moving average of every floating-point state
// entry of a model (weights, biases, BatchNorm running statistics, anchors), the weights
// YOLOv5 validates and saves. decay(u) = 0.9999 * (1 - exp(-u / 2000)) after u updates, so
// early updates follow the model closely and later ones average over ~10k steps. The average
// has the layout of the parameter arena's values, so an update is one pass over it; the few
// entries outside the arena follow one by one (the f64 anchors averaged, num_batches_tracked
// copied).
#pragma once

#include <vector>

#include "engine/parameter_arena.h"

namespace bareyolo {

class ModelEma {
 public:
  // Starts as a copy of the model's state. `state`: the entries `arena` was built from.
  ModelEma(ParameterArena& arena, const std::vector<StateEntry>& state, int64_t updates = 0);
  // Averages the model's current state into the EMA (after each optimizer step), with the decay
  // it stages in the arena's step scalars (engine/step_scalars.h) and the kernels read there.
  void update();
  // Writes the next update's decay there ahead of it (the Solver's, before a step's kernels).
  void stage_decay();
  // update()'s host half alone: the decay staged, the update counted and the integer entries
  // copied (they live on the host), no kernel (a replayed CUDA graph of the step runs the
  // kernels: kernels/step_graph.h).
  void advance();
  double decay() const;  // the decay the next update will use
  int64_t updates() const { return updates_; }
  void set_updates(int64_t updates) { updates_ = updates; }  // a resumed run's count
  // The averaged tensors, in the model's state order (views of the average; the integer
  // entries' own copies).
  std::vector<Tensor>& values() { return values_; }

 private:
  // An entry outside the arena (an integer counter, a buffer of another dtype) and its average's
  // place in values_.
  struct Outside {
    Tensor* source;
    size_t index;
  };
  ParameterArena& arena_;
  // The decay's factors in f32 and in f64 (the average's dtype, and the f64 anchors outside it).
  StepScalars::Slot float_factors_, double_factors_;
  Tensor average_;
  std::vector<Tensor> values_;
  std::vector<Outside> outside_;
  int64_t updates_;
};

}  // namespace bareyolo
