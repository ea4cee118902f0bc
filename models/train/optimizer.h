// models/train/optimizer.h — the optimizer `--optimizer` picks (YOLOv5's SGD or AdamW, both
// over its three parameter groups: 0 biases, 1 decayed weights, 2 norm weights) behind one
// face for the trainer: the schedule's settings in, a step, and the named state buffers that
// checkpoints save and restore (momentum_buffer.<param> for SGD; exp_avg.<param>,
// exp_avg_sq.<param> and a step count for AdamW).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/optim/adamw.h"
#include "engine/optim/schedule.h"
#include "engine/optim/sgd.h"
#include "models/train/options.h"

namespace bareyolo::models {

class TrainOptimizer {
 public:
  // `parameters`: the entries to optimise (frozen ones left out). weight_decay applies to
  // group 1 only.
  TrainOptimizer(OptimizerKind kind, const std::vector<StateEntry>& parameters, double lr0,
                 double momentum, double weight_decay);

  // The learning rates of this iteration (and SGD's warmup momentum; AdamW keeps beta1).
  void apply(const StepSettings& settings);
  void step();
  void zero_grad();
  double lr(int group) const;  // group 0, 1 or 2

  // Named state tensors, in a fixed order; checkpoints store them under "optimizer.<name>".
  std::vector<std::pair<std::string, Tensor*>> buffers();
  int64_t steps() const;  // updates taken (AdamW's bias correction needs it)
  void set_steps(int64_t steps);

 private:
  OptimizerKind kind_;
  std::unique_ptr<Sgd> sgd_;
  std::unique_ptr<AdamW> adamw_;
  int64_t steps_ = 0;
};

}  // namespace bareyolo::models
