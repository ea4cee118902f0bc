// engine/optim/adamw.h — YOLOv5's `--optimizer AdamW`: PyTorch's AdamW (kernels/ops.h
// adamw_step) over the same three parameter groups as Sgd (engine/optim/sgd.h), in YOLOv5's
// order:
//   group 0  biases                 weight decay 0
//   group 1  weights (convs)        weight decay = hyp weight_decay * batch * accumulate / nbs
//   group 2  normalisation weights  weight decay 0
// betas = (hyp momentum, 0.999), eps 1e-8. YOLOv5's warmup moves only groups that have a
// `momentum` (SGD's), so beta1 stays fixed here while the learning rates warm up.
#pragma once

#include <array>
#include <vector>

#include "engine/module.h"

namespace bareyolo {

struct AdamWGroup {
  double lr = 0.001, weight_decay = 0;
};

class AdamW {
 public:
  // Group indices, as optimizer_group_index (engine/module.h) orders them.
  static constexpr int kBiases = 0, kWeights = 1, kNormWeights = 2;

  // `state`: a model's state entries; the trainable ones are optimised.
  AdamW(const std::vector<StateEntry>& state, double lr, double beta1, double weight_decay,
        double beta2 = 0.999, double eps = 1e-8);

  std::array<AdamWGroup, 3>& groups() { return groups_; }
  int group_of(size_t parameter) const { return group_of_[parameter]; }
  const std::vector<StateEntry>& parameters() const { return params_; }
  // The moment buffers, one per parameter, and the number of steps taken (checkpoints save
  // them; the step count sets the bias corrections).
  std::vector<Tensor>& exp_avgs() { return exp_avg_; }
  std::vector<Tensor>& exp_avg_sqs() { return exp_avg_sq_; }
  int64_t steps() const { return steps_; }
  void set_steps(int64_t steps) { steps_ = steps; }

  // One update of every parameter from its gradient.
  void step();
  void zero_grad();

 private:
  std::vector<StateEntry> params_;
  std::vector<int> group_of_;
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
  std::array<AdamWGroup, 3> groups_;
  double beta1_, beta2_, eps_;
  int64_t steps_ = 0;
};

}  // namespace bareyolo
