// engine/optim/sgd.h — YOLOv5's optimizer: SGD with Nesterov momentum over three parameter
// groups, in YOLOv5's order:
//   group 0  biases              weight decay 0
//   group 1  weights (convs)     weight decay = hyp weight_decay * batch * accumulate / nbs
//   group 2  normalisation weights  weight decay 0
// Each group has its own lr and momentum (warmup moves them separately).
#pragma once

#include <array>
#include <vector>

#include "engine/module.h"
#include "kernels/ops.h"

namespace bareyolo {

struct SgdGroup {
  double lr = 0.01, momentum = 0.937, weight_decay = 0;
};

class Sgd {
 public:
  // Group indices, as optimizer_group_index (engine/module.h) orders them.
  static constexpr int kBiases = 0, kWeights = 1, kNormWeights = 2;

  // `state`: a model's state entries; the trainable ones are optimised.
  Sgd(const std::vector<StateEntry>& state, double lr, double momentum, double weight_decay,
      bool nesterov = true);

  std::array<SgdGroup, 3>& groups() { return groups_; }
  int group_of(size_t parameter) const { return group_of_[parameter]; }
  const std::vector<StateEntry>& parameters() const { return params_; }
  // The momentum buffers, one per parameter (checkpoints save them).
  std::vector<Tensor>& velocities() { return velocity_; }

  // One update of every parameter from its gradient.
  void step();
  // Sets every gradient to zero.
  void zero_grad();

 private:
  std::vector<StateEntry> params_;
  std::vector<int> group_of_;
  std::vector<Tensor> velocity_;
  std::array<SgdGroup, 3> groups_;
  bool nesterov_;
};

// Scales all gradients so that their global L2 norm is at most max_norm (PyTorch's
// clip_grad_norm_: factor max_norm / (norm + 1e-6) when below 1). Returns the norm.
double clip_gradient_norm(const std::vector<StateEntry>& parameters, double max_norm);

}  // namespace bareyolo
