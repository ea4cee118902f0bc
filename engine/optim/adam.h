// engine/optim/adam.h — YOLOv5's `--optimizer Adam` and `--optimizer AdamW`: PyTorch's Adam and
// AdamW (kernels/ops.h adam_step) over the same three parameter groups as Sgd (optimizer.h), in
// YOLOv5's order:
//   group 0  biases                 weight decay 0
//   group 1  weights (convs)        weight decay = hyp weight_decay * batch * accumulate / nbs
//   group 2  normalisation weights  weight decay 0
// betas = (hyp momentum, 0.999), eps 1e-8. Adam's weight decay is L2 (added to the gradient,
// so it passes through the moments); AdamW's is decoupled (the weight shrinks by lr x decay).
// YOLOv5's warmup moves only groups that have a `momentum` (SGD's), so a group's momentum is
// not read here: beta1 stays what it was constructed with while the learning rates warm up.
// State: exp_avg.<parameter> and exp_avg_sq.<parameter>; the bias corrections count steps().
#pragma once

#include "engine/optim/optimizer.h"

namespace bareyolo {

enum class AdamDecay { l2, decoupled };  // Adam, AdamW

class Adam final : public Optimizer {
 public:
  Adam(ParameterArena& arena, AdamDecay decay, double lr, double beta1, double weight_decay,
       double beta2 = 0.999, double eps = 1e-8);
  const char* kernel() const override { return "adam_step"; }

 private:
  void stage(int64_t step) override;
  void update() override;

  Tensor exp_avg_, exp_avg_sq_;
  AdamDecay decay_;
  double beta1_, beta2_, eps_;
};

}  // namespace bareyolo
