// engine/optim/adamw.h — YOLOv5's `--optimizer AdamW`: PyTorch's AdamW (kernels/ops.h
// adamw_step) over the same three parameter groups as Sgd (optimizer.h), in YOLOv5's order:
//   group 0  biases                 weight decay 0
//   group 1  weights (convs)        weight decay = hyp weight_decay * batch * accumulate / nbs
//   group 2  normalisation weights  weight decay 0
// betas = (hyp momentum, 0.999), eps 1e-8. YOLOv5's warmup moves only groups that have a
// `momentum` (SGD's), so a group's momentum is not read here: beta1 stays what it was
// constructed with while the learning rates warm up. State: exp_avg.<parameter> and
// exp_avg_sq.<parameter>; the bias corrections count steps().
#pragma once

#include "engine/optim/optimizer.h"

namespace bareyolo {

class AdamW final : public Optimizer {
 public:
  AdamW(ParameterArena& arena, double lr, double beta1, double weight_decay, double beta2 = 0.999,
        double eps = 1e-8);
  const char* kernel() const override { return "adamw_step"; }

 private:
  void update() override;

  Tensor exp_avg_, exp_avg_sq_;
  double beta1_, beta2_, eps_;
};

}  // namespace bareyolo
