// engine/optim/ema.h — ModelEMA: an exponential moving average of every floating-point state
// entry of a model (weights, biases, BatchNorm running statistics, anchors), the weights
// YOLOv5 validates and saves. decay(u) = 0.9999 * (1 - exp(-u / 2000)) after u updates, so
// early updates follow the model closely and later ones average over ~10k steps. Integer
// entries (num_batches_tracked) are copied, not averaged.
#pragma once

#include <vector>

#include "engine/module.h"

namespace bareyolo {

class ModelEma {
 public:
  // Starts as a copy of the model's state.
  explicit ModelEma(const std::vector<StateEntry>& model_state, int64_t updates = 0);

  // Averages the model's current state into the EMA (after each optimizer step).
  void update(const std::vector<StateEntry>& model_state);
  double decay() const;  // the decay the next update will use
  int64_t updates() const { return updates_; }
  // The averaged tensors, in the model's state order.
  std::vector<Tensor>& values() { return values_; }

 private:
  std::vector<Tensor> values_;
  int64_t updates_;
};

}  // namespace bareyolo
