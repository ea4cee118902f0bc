// engine/optim/sgd.h — YOLOv5's optimizer: SGD with Nesterov momentum over three parameter
// groups, in YOLOv5's order (optimizer.h):
//   group 0  biases                 weight decay 0
//   group 1  weights (convs)        weight decay = hyp weight_decay * batch * accumulate / nbs
//   group 2  normalisation weights  weight decay 0
// Each group has its own lr and momentum (warmup moves them separately). State:
// momentum_buffer.<parameter>.
#pragma once

#include "engine/optim/optimizer.h"

namespace bareyolo {

class Sgd final : public Optimizer {
 public:
  Sgd(ParameterArena& arena, double lr, double momentum, double weight_decay, bool nesterov = true);
  const char* kernel() const override { return "sgd_step"; }

 private:
  void stage(int64_t step) override;
  void update() override;

  Tensor velocity_;
  bool nesterov_;
};

}  // namespace bareyolo
